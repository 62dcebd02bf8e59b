"""Recall: rank an agent's records, a divided one by its best node, and quote each by that node.

An agent's records, nodes and passages are read once per process into an `AgentIndex` (a
`RecallIndex`: texts, BM25 postings, vectors) and kept while its recall generation stands (every
write raises it, in the write's own transaction), so a recall over 100,000 memories costs one
primary-key read, not 100,000 rows. A write that names its records is applied in place by the
next recall: those records alone are read again.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from collections_app.models import Agent
from ragsite import embedding
from ragsite.embedders import Embedder, EmbeddingError
from ragsite.fusion import FUSION_WEIGHT
from ragsite.lexical import terms
from ragsite.top import top_rows

from .. import conf
from ..models import KINDS, RECORD_MODELS, NodePassages, RecordNode
from ..recall_index import NodeRow, RecallIndex, RecordRow
from .common import _can_embed, recall_generation, recent_changes, validate_query

logger = logging.getLogger("memory_app")


# Agents whose recall index a process keeps; the least recently used goes first.
CACHED_AGENTS = 32


@dataclass
class AgentIndex:
    """An agent's recall index (`RecallIndex`) as of one recall epoch and generation and embedding model.

    Updated in place by the next recall after a write; `lock` is held while it is updated or
    scored, so no thread reads it half updated.
    """

    epoch: str
    generation: int
    model: str
    index: RecallIndex
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def size(self) -> int:
        return self.index.size


_cache: OrderedDict[int, AgentIndex] = OrderedDict()
_cache_lock = threading.Lock()


def agent_index(agent: Agent, model: str) -> AgentIndex:
    """The agent's cached index, brought up to (at least) its recall generation.

    Unchanged generation: used as it is (one primary-key read). A few generations behind, each
    naming the records it changed: those records are read again and replaced in place. Otherwise
    (a new process, another model, a write that named nothing, too far behind): everything is read.
    """
    epoch, generation = recall_generation(agent.pk)  # read before the rows, so a write in between only repeats
    with _cache_lock:
        cached = _cache.get(agent.pk)
    if cached is not None and cached.model == model and cached.epoch == epoch:
        with cached.lock:
            if cached.generation > generation:  # cannot happen within one epoch; start again if it does
                cached = None
            elif cached.generation < generation:
                if _update(agent, cached, generation):
                    cached.generation = generation
                else:
                    cached = None
    else:
        cached = None
    if cached is None:
        cached = AgentIndex(epoch, generation, model, _load(agent, model, _read(agent, model, None)))
    with _cache_lock:
        _cache[agent.pk] = cached
        _cache.move_to_end(agent.pk)
        while len(_cache) > CACHED_AGENTS:
            _cache.popitem(last=False)
    return cached


def forget_agent(agent_id: int) -> None:
    with _cache_lock:
        _cache.pop(agent_id, None)


def _vector(data, model_of_row: str, model: str) -> np.ndarray | None:
    if data is None or model_of_row != model:
        return None
    return np.frombuffer(bytes(data), dtype="<f4")


def _read(agent: Agent, model: str, keys: set[tuple[str, int]] | None) -> list[RecordRow]:
    """The agent's records (all, or those of `keys` that still exist) with their nodes of `model`."""
    records: list[RecordRow] = []
    for kind, record_class in RECORD_MODELS.items():
        rows = record_class.objects.filter(agent=agent)
        nodes = RecordNode.objects.filter(parent_kind=kind, embedding_model=model, embedding__isnull=False)
        if keys is not None:
            wanted = sorted(id for key_kind, id in keys if key_kind == kind)
            if not wanted:
                continue
            rows = rows.filter(pk__in=wanted)
            nodes = nodes.filter(parent_id__in=wanted)
        else:
            nodes = nodes.filter(parent_id__in=record_class.objects.filter(agent=agent).values("pk"))
        order = KINDS.index(kind)
        these = {
            pk: RecordRow(kind, pk, order, text, _vector(data, by, model))
            for pk, text, data, by in rows.order_by("pk").values_list("pk", "text", "embedding", "embedding_model")
        }
        passages = NodePassages.objects.filter(parent_kind=kind, embedding_model=model)
        passages = passages.filter(parent_id__in=wanted) if keys is not None else passages.filter(
            parent_id__in=record_class.objects.filter(agent=agent).values("pk"))
        passages_of = {(parent_id, index): (bounds, data) for parent_id, index, bounds, data in passages.values_list(
            "parent_id", "node_index", "bounds", "embeddings")}
        for parent_id, index, start, end, data in nodes.order_by("parent_id", "node_index").values_list(
            "parent_id", "node_index", "start_char", "end_char", "embedding"
        ):
            record = these.get(parent_id)
            if record is None:
                continue
            node = NodeRow(index, start, end, _vector(data, model, model))
            bounds, passage_data = passages_of.get((parent_id, index), (None, None))
            if bounds is not None:
                bounds = np.frombuffer(bytes(bounds), dtype="<i4").tolist()
                # Passages of an older division of the text (not yet rebuilt) are not this node's.
                if bounds[0] == start and bounds[-1] == end:
                    node.passages = list(zip(bounds[:-1], bounds[1:], strict=True))
                    if passage_data is not None and node.vector is not None:
                        node.passage_vectors = list(np.frombuffer(bytes(passage_data), dtype="<f2").astype(
                            np.float32).reshape(len(node.passages), node.vector.size))
            record.nodes.append(node)
        records.extend(these.values())
    return records


def _width(records: list[RecordRow]) -> int:
    for record in records:
        for vector in chain([record.vector], (node.vector for node in record.nodes)):
            if vector is not None:
                return vector.size
    return 0


def _load(agent: Agent, model: str, records: list[RecordRow]) -> RecallIndex:
    index = RecallIndex(_width(records))
    index.put(records)
    logger.debug("recall index of %s: %d records, %d nodes", agent.agent_id, index.size, index.node_owner.size)
    return index


def _update(agent: Agent, cached: AgentIndex, generation: int) -> bool:
    """Replace the records changed since the cached generation; False when they are not known."""
    keys = recent_changes(agent.pk, cached.generation, generation)
    if keys is None:
        return False
    records = _read(agent, cached.model, keys)
    width = _width(records)
    if width and width != cached.index.width:  # the first vectors, or another width: start again
        return False
    for kind, id in keys:
        cached.index.drop(kind, id)
    cached.index.put(records)
    return True


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


def _top(scores: np.ndarray, index: RecallIndex, most: int) -> np.ndarray:
    """Rows of the `most` best positive scores, ties by kind then id."""
    return top_rows(scores, scores > 0, most, ties=(index.kind_order.array, index.ids.array))


def recall(*, agent: Agent, query: str, most: int = conf.DEFAULT_MOST) -> list[dict]:
    """The agent's records that best answer `query`, best first, each quoted by an excerpt.

    BM25 and cosine fused by `ragsite.fusion.hybrid_scores` into one [0, 1] score, for a record
    that has nodes by its best node, a node by the best of itself and its passages
    (`RecallIndex.scores`); only embeddings of the current model take part, and with none at all
    the query is not embedded and the ranking is lexical. Ties go by kind, then id; records
    scoring 0 are left out. Each record is quoted by the node that ranked it, or by its opening
    when it has no nodes.
    Each result is `{"kind", "id", "score", "excerpt": {"text", "node_index", "start", "end"}}`.
    """
    query, most = validate_query(query, most)
    embedder = embedding.get_embedder()
    entry = agent_index(agent, embedder.model)
    # Embedded outside the lock: it is most of a recall, and needs nothing from the index but this.
    vector = _QueryVector(query, embedder).get() if entry.index.has_vectors else None
    with entry.lock:
        return _ranked(entry.index, query, most, vector)


def _ranked(index: RecallIndex, query: str, most: int, vector: np.ndarray | None) -> list[dict]:
    if not index.size:
        return []
    if vector is not None:
        vector = np.asarray(vector, dtype=np.float32)
        if vector.shape != (index.width,):
            vector = None  # not comparable with the stored vectors: rank lexically
    scores, best_node = index.scores(terms(query), vector, FUSION_WEIGHT)
    results = []
    for row in _top(scores, index, most):
        text = index.texts[row]
        node = int(best_node[row])
        if node >= 0:
            start, end = (int(v) for v in index.node_spans.array[node])
            excerpt = {"text": text[start:end], "node_index": int(index.node_index.array[node]), "start": start,
                       "end": end}
        else:
            start, end = opening(text)
            excerpt = {"text": text[start:end], "node_index": None, "start": start, "end": end}
        results.append({"kind": index.kinds[row], "id": int(index.ids.array[row]), "score": round(float(scores[row]), 6),
                        "excerpt": excerpt})
    return results
