"""Recall: rank an agent's records, a divided one by its best node, and quote each by that node.

An agent's records are read once per process into an `AgentIndex` (texts, BM25, vectors, nodes) and
kept until its recall generation moves (every write raises it, in the write's own transaction), so a
recall over 100,000 memories costs one primary-key read, not 100,000 rows.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from collections_app.models import Agent
from ragsite import embedding
from ragsite.embedders import Embedder, EmbeddingError
from ragsite.fusion import DEFAULT_WEIGHT, hybrid_scores
from ragsite.lexical import BM25Index, terms

from .. import conf
from ..models import KINDS, RECORD_MODELS, RecordNode
from .common import _can_embed, recall_generation, validate_query

logger = logging.getLogger("memory_app")


# Agents whose recall index a process keeps; the least recently used goes first.
CACHED_AGENTS = 32


@dataclass
class AgentIndex:
    """An agent's records as recall reads them, built once per recall generation and embedding model.

    Rows are the records (memories, then episodes, each by id). A divided record's nodes of the
    current model are kept as one matrix, grouped by record, so its best node is a reduceat away.
    """

    generation: int
    model: str
    kinds: list[str]
    ids: np.ndarray  # record id per row
    kind_order: np.ndarray  # position of the row's kind in KINDS: ties go by kind, then id
    texts: list[str]
    bm25: BM25Index
    vector_rows: np.ndarray  # rows with an embedding of `model`
    matrix: np.ndarray | None  # (len(vector_rows), d)
    node_rows: np.ndarray  # owner row per node, grouped, owners ascending
    node_starts: np.ndarray  # first node of each owner in the node arrays
    node_index: np.ndarray
    node_spans: np.ndarray  # (nodes, 2) start, end
    node_matrix: np.ndarray | None
    node_bm25: BM25Index  # the nodes' own texts, scored with the records' statistics

    @property
    def size(self) -> int:
        return len(self.texts)


_cache: OrderedDict[int, AgentIndex] = OrderedDict()
_cache_lock = threading.Lock()


def agent_index(agent: Agent, model: str) -> AgentIndex:
    """The agent's cached index, rebuilt when its recall generation or the embedding model moved."""
    generation = recall_generation(agent.pk)  # read before the rows, so a write in between only rebuilds
    with _cache_lock:
        cached = _cache.get(agent.pk)
        if cached is not None and cached.generation == generation and cached.model == model:
            _cache.move_to_end(agent.pk)
            return cached
    index = _load(agent, model, generation)
    with _cache_lock:
        _cache[agent.pk] = index
        _cache.move_to_end(agent.pk)
        while len(_cache) > CACHED_AGENTS:
            _cache.popitem(last=False)
    return index


def forget_agent(agent_id: int) -> None:
    with _cache_lock:
        _cache.pop(agent_id, None)


def _load(agent: Agent, model: str, generation: int) -> AgentIndex:
    kinds: list[str] = []
    ids: list[int] = []
    texts: list[str] = []
    vectors: list[bytes | None] = []
    for kind, record_class in RECORD_MODELS.items():
        rows = record_class.objects.filter(agent=agent).order_by("pk")
        for pk, text, vector_bytes, embedding_model in rows.values_list("pk", "text", "embedding", "embedding_model"):
            kinds.append(kind)
            ids.append(pk)
            texts.append(text)
            vectors.append(bytes(vector_bytes) if vector_bytes is not None and embedding_model == model else None)
    width = next((len(v) for v in vectors if v is not None), 0)
    vector_rows = np.asarray([row for row, v in enumerate(vectors) if v is not None and len(v) == width], np.int64)
    matrix = None
    if vector_rows.size:
        matrix = np.frombuffer(b"".join(vectors[row] for row in vector_rows), dtype="<f4").reshape(-1, width // 4)
    row_of = {(kind, pk): row for row, (kind, pk) in enumerate(zip(kinds, ids, strict=True))}
    node_rows, node_index, spans, node_vectors = [], [], [], []
    for kind, record_class in RECORD_MODELS.items():
        nodes = RecordNode.objects.filter(
            parent_kind=kind,
            parent_id__in=record_class.objects.filter(agent=agent).values("pk"),
            embedding_model=model,
            embedding__isnull=False,
        ).order_by("parent_id", "node_index")
        for parent_id, index, start, end, vector_bytes in nodes.values_list(
            "parent_id", "node_index", "start_char", "end_char", "embedding"
        ):
            row = row_of.get((kind, parent_id))
            # A node past its record's end belongs to an older text (a raw edit the trigger missed).
            if row is None or end > len(texts[row]) or len(vector_bytes) != width:
                continue
            node_rows.append(row)
            node_index.append(index)
            spans.append((start, end))
            node_vectors.append(bytes(vector_bytes))
    node_rows_array = np.asarray(node_rows, dtype=np.int64)
    order = np.argsort(node_rows_array, kind="stable")  # memories' nodes, then episodes': group by row
    node_rows_array = node_rows_array[order]
    node_matrix = None
    if node_vectors:
        node_matrix = np.frombuffer(b"".join(node_vectors[i] for i in order), dtype="<f4").reshape(-1, width // 4)
    starts = np.flatnonzero(np.diff(node_rows_array, prepend=-1)) if node_rows_array.size else node_rows_array
    node_spans = np.asarray(spans, dtype=np.int64).reshape(-1, 2)[order]
    bm25 = BM25Index.from_texts(texts)
    node_texts = (texts[row][start:end] for row, (start, end) in zip(node_rows_array.tolist(), node_spans.tolist(),
                                                                      strict=True))
    logger.debug("recall index of %s: %d records, %d nodes", agent.agent_id, len(texts), node_rows_array.size)
    return AgentIndex(
        generation=generation,
        model=model,
        kinds=kinds,
        ids=np.asarray(ids, dtype=np.int64),
        kind_order=np.asarray([KINDS.index(kind) for kind in kinds], dtype=np.int64),
        texts=texts,
        bm25=bm25,
        vector_rows=vector_rows,
        matrix=matrix,
        node_rows=node_rows_array,
        node_starts=starts,
        node_index=np.asarray(node_index, dtype=np.int64)[order],
        node_spans=node_spans,
        node_matrix=node_matrix,
        node_bm25=BM25Index.from_texts(node_texts).scored_as(bm25),
    )


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


def _scores(index: AgentIndex, query_terms: list[str], vector: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """Per record, the fused score recall ranks by, and the node that gave it (-1: the record itself).

    A divided record is ranked by its best-matching node (issue 12; seed 002 §7 left this to be
    decided, see docs/decisions.md): each node is scored like a record — its cosine, and the BM25
    of its own span with the records' statistics — and the record takes its best node's score. An
    undivided record is scored by itself, exactly as before nodes existed.
    """
    upper = index.bm25.upper_bound(query_terms)
    cosine = None
    if vector is not None:
        vector = np.asarray(vector, dtype=np.float32)
        cosine = np.zeros(index.size, dtype=np.float64)
        if index.matrix is not None:
            cosine[index.vector_rows] = index.matrix @ vector
    scores, _mode = hybrid_scores(cosine, index.bm25.scores(query_terms), upper, weight=DEFAULT_WEIGHT)
    best_node = np.full(index.size, -1, dtype=np.int64)
    if index.node_rows.size == 0:
        return scores, best_node
    node_cosine = None if vector is None or index.node_matrix is None else (index.node_matrix @ vector).astype(np.float64)
    per_node, _mode = hybrid_scores(node_cosine, index.node_bm25.scores(query_terms), upper, weight=DEFAULT_WEIGHT)
    best = np.maximum.reduceat(per_node, index.node_starts)
    owners = index.node_rows[index.node_starts]
    scores[owners] = best
    # The first node reaching its owner's best: the earlier node wins a tie.
    group = np.repeat(np.arange(index.node_starts.size), np.diff(np.append(index.node_starts, per_node.size)))
    reaching = np.flatnonzero(per_node == best[group])
    best_node[owners] = reaching[np.unique(group[reaching], return_index=True)[1]]
    return scores, best_node


def _top(scores: np.ndarray, index: AgentIndex, most: int) -> np.ndarray:
    """Rows of the `most` best positive scores, ties by kind then id: one partition, then a sort."""
    positive = np.flatnonzero(scores > 0)
    if positive.size > most:
        threshold = np.partition(scores[positive], positive.size - most)[positive.size - most]
        positive = positive[scores[positive] >= threshold]
    order = np.lexsort((index.ids[positive], index.kind_order[positive], -scores[positive]))
    return positive[order][:most]


def recall(*, agent: Agent, query: str, most: int = conf.DEFAULT_MOST) -> list[dict]:
    """The agent's records that best answer `query`, best first, each quoted by an excerpt.

    BM25 and cosine fused by `ragsite.fusion.hybrid_scores` into one [0, 1] score, for a record
    that has nodes by its best node (`_scores`); only embeddings of the current model take part,
    and with none at all the query is not embedded and the ranking is lexical. Ties go by kind, then id; records scoring 0 are left out.
    Each record is quoted by the node that ranked it, or by its opening when it has no nodes.
    Each result is `{"kind", "id", "score", "excerpt": {"text", "node_index", "start", "end"}}`.
    """
    query, most = validate_query(query, most)
    embedder = embedding.get_embedder()
    index = agent_index(agent, embedder.model)
    if not index.size:
        return []
    query_vector = _QueryVector(query, embedder)
    vector = query_vector.get() if index.matrix is not None or index.node_matrix is not None else None
    scores, best_node = _scores(index, terms(query), vector)
    results = []
    for row in _top(scores, index, most):
        text = index.texts[row]
        node = int(best_node[row])
        if node >= 0:
            start, end = (int(v) for v in index.node_spans[node])
            excerpt = {"text": text[start:end], "node_index": int(index.node_index[node]), "start": start, "end": end}
        else:
            start, end = opening(text)
            excerpt = {"text": text[start:end], "node_index": None, "start": start, "end": end}
        results.append({"kind": index.kinds[row], "id": int(index.ids[row]), "score": round(float(scores[row]), 6),
                        "excerpt": excerpt})
    return results
