"""Recall: rank an agent's records, then quote each by its most relevant node."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import numpy as np

from collections_app.models import Agent
from ragsite import embedding
from ragsite.embedders import Embedder, EmbeddingError
from ragsite.fusion import DEFAULT_WEIGHT, hybrid_scores
from ragsite.lexical import BM25Index, terms

from .. import conf
from ..models import KINDS, RECORD_MODELS, RecordNode
from .common import _can_embed, validate_query

logger = logging.getLogger("memory_app")


@dataclass
class _Candidate:
    kind: str
    id: int
    text: str
    embedding: bytes | None
    embedding_model: str


def _agent_records(agent: Agent) -> list[_Candidate]:
    candidates: list[_Candidate] = []
    for kind, model in RECORD_MODELS.items():
        rows = model.objects.filter(agent=agent).order_by("pk")
        for pk, text, vector_bytes, embedding_model in rows.values_list("pk", "text", "embedding", "embedding_model"):
            candidates.append(_Candidate(kind, pk, text, vector_bytes, embedding_model))
    return candidates


class _QueryVector:
    """The query's embedding, computed at most once and only when something needs it."""

    def __init__(self, query: str, embedder: Embedder) -> None:
        self.query = query
        self.embedder = embedder
        self._vector: np.ndarray | None = None
        self._tried = False

    def get(self) -> np.ndarray | None:
        if not self._tried:
            self._tried = True
            try:
                if _can_embed(self.embedder):
                    self._vector = self.embedder.embed([self.query])[0]
            except EmbeddingError as exc:
                # Recall still answers, lexically, when the embedder is down.
                logger.warning("embedding a recall query failed: %s", exc)
        return self._vector


def _rank_records(
    candidates: list[_Candidate], query: str, query_vector: _QueryVector
) -> list[tuple[int, float]]:
    """(candidate position, score) best first, over the records alone.

    BM25 over the records' texts and cosine over their embeddings, fused by
    `ragsite.fusion.hybrid_scores` into one [0, 1] score. Only embeddings of the current
    model take part; a record without one scores 0 on the vector side. With no such embedding
    at all the query is not embedded and the ranking is lexical. Ties go by kind, then id, so
    the order is fully determined. Records scoring 0 are left out.
    """
    index = BM25Index.from_texts(candidate.text for candidate in candidates)
    query_terms = terms(query)
    bm25 = index.scores(query_terms)
    model = query_vector.embedder.model
    with_vectors = [
        row for row, c in enumerate(candidates) if c.embedding is not None and c.embedding_model == model
    ]
    cosine = None
    if with_vectors:
        vector = query_vector.get()
        if vector is not None:
            cosine = np.zeros(len(candidates), dtype=np.float64)
            matrix = np.stack([np.frombuffer(bytes(candidates[row].embedding), dtype="<f4") for row in with_vectors])
            cosine[with_vectors] = matrix @ np.asarray(vector, dtype=np.float32)
    scores, _mode = hybrid_scores(cosine, bm25, index.upper_bound(query_terms), weight=DEFAULT_WEIGHT)
    order = sorted(range(len(candidates)), key=lambda row: (-scores[row], candidates[row].kind, candidates[row].id))
    return [(row, float(scores[row])) for row in order if scores[row] > 0]


def opening(text: str, length: int = conf.OPENING_LENGTH) -> tuple[int, int]:
    """(0, end) of a record's opening: about `length` characters, ending at a word's end when possible."""
    if len(text) <= length:
        end = len(text)
    else:
        # Back to the last whitespace, unless that would give up more than half the opening.
        space = max(text.rfind(" ", 0, length + 1), text.rfind("\n", 0, length + 1))
        end = space if space >= length // 2 else length
    while end > 0 and text[end - 1].isspace():
        end -= 1
    return 0, end


def _excerpts(
    chosen: list[_Candidate], query_vector: _QueryVector
) -> dict[tuple[str, int], dict]:
    """Each chosen record's excerpt: its node closest to the query (cosine), or its opening."""
    model = query_vector.embedder.model
    nodes: dict[tuple[str, int], list[tuple[int, int, int, bytes]]] = {}
    for kind in KINDS:
        ids = [c.id for c in chosen if c.kind == kind]
        if not ids:
            continue
        rows = RecordNode.objects.filter(
            parent_kind=kind, parent_id__in=ids, embedding_model=model, embedding__isnull=False
        ).order_by("parent_id", "node_index")
        for parent_id, index, start, end, vector_bytes in rows.values_list(
            "parent_id", "node_index", "start_char", "end_char", "embedding"
        ):
            nodes.setdefault((kind, parent_id), []).append((index, start, end, bytes(vector_bytes)))
    excerpts = {}
    for candidate in chosen:
        key = (candidate.kind, candidate.id)
        own = [node for node in nodes.get(key, []) if node[2] <= len(candidate.text)]
        vector = query_vector.get() if own else None
        if own and vector is not None:
            matrix = np.stack([np.frombuffer(node[3], dtype="<f4") for node in own])
            # argmax takes the first of equal scores: the earlier node wins a tie.
            index, start, end, _ = own[int(np.argmax(matrix @ np.asarray(vector, dtype=np.float32)))]
            excerpts[key] = {"text": candidate.text[start:end], "node_index": index, "start": start, "end": end}
        else:
            start, end = opening(candidate.text)
            excerpts[key] = {"text": candidate.text[start:end], "node_index": None, "start": start, "end": end}
    return excerpts


def recall(*, agent: Agent, query: str, most: int = conf.DEFAULT_MOST) -> list[dict]:
    """The agent's records that best answer `query`, best first, each quoted by an excerpt.

    Ranking is `_rank_records` over the records only; nodes then choose each excerpt (the
    record's most relevant node by cosine, with its node_index and offsets, or the record's
    opening when it has no nodes of the current model). Each result is
    `{"kind", "id", "score", "excerpt": {"text", "node_index", "start", "end"}}`.
    """
    query, most = validate_query(query, most)
    candidates = _agent_records(agent)
    if not candidates:
        return []
    query_vector = _QueryVector(query, embedding.get_embedder())
    ranked = _rank_records(candidates, query, query_vector)[:most]
    chosen = [candidates[row] for row, _score in ranked]
    excerpts = _excerpts(chosen, query_vector)
    return [
        {
            "kind": candidate.kind,
            "id": candidate.id,
            "score": round(score, 6),
            "excerpt": excerpts[(candidate.kind, candidate.id)],
        }
        for candidate, (_row, score) in zip(chosen, ranked, strict=True)
    ]
