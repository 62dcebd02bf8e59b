"""Recall: rank excerpts of an agent's records and quote the best within a character budget.

The candidates are the nodes of divided records, the records that fit the window (whole), and
the opening of a record whose nodes are still pending; `memory_app.excerpts` takes them best
first, merges those that touch and cuts the last one to the budget.

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain, islice

import numpy as np

from collections_app.models import Agent
from ragsite import embedding
from ragsite.analyzers import SIMPLE
from ragsite.conf import settings
from ragsite.embedders import Embedder, EmbeddingError
from ragsite.instruments import RECALLS
from ragsite.model_calls.rerank import reorder, rerank_status
from ragsite.top import top_rows

from .. import conf
from ..excerpts import NODE, PENDING, WHOLE, Candidate, Selection, node_rest_score, select
from ..expansion import found_terms
from ..filters import KeptStatistics, has_vectors_in, kept, parse_filters, superseded
from ..recall_index import RecallIndex
from .common import (
    _can_embed,
    recall_generation,
    validate_max_chars,
    validate_query,
)
from .recall_rows import _load, _read, _update

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
    window: int | None  # the model's token window: a record past it without nodes is pending
    index: RecallIndex
    analyzer: str = SIMPLE  # how the keyword leg reads words (MEMORY_ANALYZER when it was built)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def size(self) -> int:
        return self.index.size


_cache: OrderedDict[int, AgentIndex] = OrderedDict()
_cache_lock = threading.Lock()


def current_index(agent: Agent, model: str, window: int | None = None) -> AgentIndex | None:
    """The agent's cached index when it stands at the agent's recall generation (one primary-key
    read), else None: then `agent_index` has rows to read."""
    epoch, generation = recall_generation(agent.pk)
    with _cache_lock:
        cached = _cache.get(agent.pk)
    if cached is None or (cached.model, cached.window, cached.analyzer, cached.epoch, cached.generation) != (
        model,
        window,
        conf.memory_analyzer(),
        epoch,
        generation,
    ):
        return None
    with _cache_lock:
        _cache.move_to_end(agent.pk)
    return cached


def agent_index(agent: Agent, model: str, window: int | None = None) -> AgentIndex:
    """The agent's cached index, brought up to (at least) its recall generation.

    Unchanged generation: used as it is (one primary-key read). A few generations behind, each
    naming the records it changed: those records are read again and replaced in place. Otherwise
    (a new process, another model, a write that named nothing, too far behind): everything is read.
    """
    epoch, generation = recall_generation(
        agent.pk
    )  # read before the rows, so a write in between only repeats
    analyzer_name = conf.memory_analyzer()
    with _cache_lock:
        cached = _cache.get(agent.pk)
    if cached is not None and (cached.model, cached.window, cached.analyzer, cached.epoch) == (
        model,
        window,
        analyzer_name,
        epoch,
    ):
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
        records = _read(agent, model, window, None)
        cached = AgentIndex(
            epoch, generation, model, window, _load(agent, analyzer_name, records), analyzer_name
        )
    with _cache_lock:
        _cache[agent.pk] = cached
        _cache.move_to_end(agent.pk)
        while len(_cache) > CACHED_AGENTS:
            _cache.popitem(last=False)
    return cached


def forget_agent(agent_id: int) -> None:
    with _cache_lock:
        _cache.pop(agent_id, None)


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


def recall(
    *,
    agent: Agent,
    query: str,
    most: int = conf.DEFAULT_MOST,
    max_chars: int | None = None,
    since: datetime | str | None = None,
    until: datetime | str | None = None,
    valid_at: datetime | str | None = None,
    kinds: list[str] | None = None,
    tags: list[str] | None = None,
) -> dict:
    """The excerpts of the agent's records that best answer `query`, best first, within `max_chars`.

    Candidates (`memory_app.excerpts`): each node of a divided record, scored as the best of itself
    and its passages; each record that fits the window, whole, scored by itself; the opening of a
    record whose nodes are pending, scored by the record. Scores are BM25 and cosine fused by
    `ragsite.fusion.hybrid_scores` at `conf.RECALL_FUSION_WEIGHT` into [0, 1], with the agent's own
    records' statistics; only embeddings of the current model take part, and with none at all the
    query is not embedded and the ranking is lexical. Ties go by kind, id, then node; candidates
    scoring 0 are left out. At most `most` excerpts and `max_chars` characters (default
    `MEMORY_RECALL_MAX_CHARS`); the last excerpt is cut to fit at sentence boundaries.

    Filters, applied before anything is scored (`memory_app.filters.kept`): `since`/`until` bound the
    creation time, `valid_at` keeps the records valid then, `kinds` and `tags` (all of them) keep
    those records; the answer is the one a store holding only the kept records would give.

    Answers `{"excerpts": [{"kind", "id", "score", "text", "start", "end", "nodes", "record_length",
    "cut", "superseded_by"}], "chars", "max_chars", "cut"}` where `nodes` is `{"first", "last"}` for
    an excerpt of nodes, null for a whole record (or a cut of it), and "pending" for an opening; an
    excerpt another excerpt restates with other values (`ragsite.slots`) names its record in
    `superseded_by`, and the newer one is placed first.
    """
    query, most = validate_query(query, most)
    max_chars = validate_max_chars(conf.recall_max_chars() if max_chars is None else max_chars)
    filters = parse_filters(since, until, valid_at, kinds, tags)
    embedder = embedding.get_embedder()
    asked = _QueryVector(query, embedder)
    entry = current_index(agent, embedder.model, embedder.window)
    if entry is None:
        # The index must be brought up to date (rows read): the question is embedded meanwhile, in
        # a thread, outside the index's lock (it needs nothing from the index).
        embedding_thread = threading.Thread(target=asked.get, daemon=True) if _can_embed(embedder) else None
        if embedding_thread is not None:
            embedding_thread.start()
        entry = agent_index(agent, embedder.model, embedder.window)
        if embedding_thread is not None:
            embedding_thread.join()
    # With the index current (the usual recall) there is nothing to overlap: the question is embedded
    # on this thread, which spares a thread's start and join and the two threads' contention for the
    # GIL. Should the agent have no vectors at all, the question is not embedded.
    # Should the records the filters keep have no vectors at all, the question is not embedded either:
    # the answer is the lexical one a store of those records alone would give.
    with entry.lock:
        has_vectors = has_vectors_in(entry.index, kept(entry.index, filters))
    vector = asked.get() if has_vectors else None
    with entry.lock:
        generation = entry.generation
        keep = kept(entry.index, filters)  # again: the index may have moved while the question was embedded
        ordered, text_of, choose = _ordered(entry.index, query, most, max_chars, vector, keep)
        if not settings.RERANK_URL:
            selection, rerank = choose(ordered, text_of), rerank_status("not configured")
            excerpts = superseded([_shown(text_of, excerpt) for excerpt in selection.excerpts], entry.index)
        else:
            # The reranker's first candidates, and their records' texts, taken now: the call is made
            # without the lock, so the agent's other recalls and index updates do not wait for it.
            head = list(islice(ordered, max(int(settings.RERANK_DEPTH), most)))
            held = {(c.kind, c.id): text_of(c.kind, c.id) for c in head}
    if settings.RERANK_URL:
        reordered, rerank = _reranked(head, query, lambda kind, id: held[(kind, id)])
        with entry.lock:
            # The rest of the fused order, unless the index moved meanwhile (its rows may be gone):
            # then the answer is the reranked head alone.
            unchanged = entry.generation == generation
            rest = ordered if unchanged else iter(())

            def text_then(kind: str, id: int) -> str:
                return held[(kind, id)] if (kind, id) in held else text_of(kind, id)

            selection = choose(chain(reordered, rest), text_then)
            excerpts = superseded([_shown(text_then, excerpt) for excerpt in selection.excerpts], entry.index)
    RECALLS.labels(mode="lexical" if vector is None else "hybrid").inc()
    return {
        "excerpts": excerpts,
        "chars": selection.chars,
        "max_chars": max_chars,
        "cut": selection.cut,
        "rerank": rerank,
    }


def _shown(text_of: Callable[[str, int], str], excerpt) -> dict:
    text = text_of(excerpt.kind, excerpt.id)
    if excerpt.source == PENDING:
        nodes: dict | str | None = PENDING
    elif excerpt.first_node is None:
        nodes = None
    else:
        nodes = {"first": excerpt.first_node, "last": excerpt.last_node}
    return {
        "kind": excerpt.kind,
        "id": excerpt.id,
        "score": round(excerpt.score, 6),
        "text": text[excerpt.start : excerpt.end],
        "start": excerpt.start,
        "end": excerpt.end,
        "nodes": nodes,
        "record_length": len(text),
        "cut": excerpt.cut,
        "superseded_by": None,
    }


def _ordered(
    index: RecallIndex,
    query: str,
    most: int,
    max_chars: int,
    vector: np.ndarray | None,
    keep: np.ndarray | None = None,
) -> tuple[Iterator[Candidate], Callable[[str, int], str], Callable[..., Selection]]:
    """The candidates best first (lazily: read them under the index's lock), their records' texts,
    and the selection to apply to them (`memory_app.excerpts.select` with this recall's limits).

    `keep` (`memory_app.filters.kept`): the records the recall's filters keep; no other record is scored,
    counted in the statistics or offered as a candidate."""

    def text_of(kind: str, id: int) -> str:
        return index.texts[index.row_of[(kind, id)]]

    def choose(candidates: Iterator[Candidate], texts: Callable[[str, int], str]) -> Selection:
        return select(
            candidates,
            texts,
            max_chars=max_chars,
            most=most,
            terms_of=lambda text: set(index.terms(text)),
            query_terms=set(query_terms),
            longest=max(1, int(conf.EXCERPT_SHARE * max_chars)),
            rest_score=node_rest_score(conf.NODE_SCORE_MIX) if conf.EXCERPT_PIECE else None,
            piece=conf.EXCERPT_PIECE,
            repeat_penalty=conf.RECALL_REPEAT_PENALTY,
            redundancy=conf.RECALL_REDUNDANCY if vector is not None else 0.0,
        )

    query_terms = index.terms(query)
    if not index.size:
        return iter(()), text_of, choose
    if vector is not None:
        vector = np.asarray(vector, dtype=np.float32)
        if vector.shape != (index.width,):
            vector = None  # not comparable with the stored vectors: rank lexically
    statistics = None if keep is None else KeptStatistics(index.statistics, index.records, keep)
    scored = index.level_scores(
        query_terms, vector, conf.RECALL_FUSION_WEIGHT, conf.NODE_SCORE_MIX, keep=keep, statistics=statistics
    )
    divided = index.divided()
    alive = index.records.alive.array if keep is None else keep
    records = np.flatnonzero(alive & ~divided)
    nodes = np.flatnonzero(index.nodes.alive.array & alive[index.node_owner.array])
    owners = index.node_owner.array[nodes]
    # One array of candidates: record rows first, then node rows (position >= records.size).
    scores = np.concatenate([scored.records[records], scored.nodes[nodes]])
    kind_order = np.concatenate([index.kind_order.array[records], index.kind_order.array[owners]])
    ids = np.concatenate([index.ids.array[records], index.ids.array[owners]])
    node_index = np.concatenate([np.full(records.size, -1, np.int64), index.node_index.array[nodes]])
    if conf.EXCERPT_LENGTH_EXPONENT:
        lengths = np.concatenate(
            [
                [
                    conf.OPENING_LENGTH if index.pending.array[row] else len(index.texts[row])
                    for row in records.tolist()
                ],
                np.diff(index.node_spans.array[nodes], axis=1)[:, 0],
            ]
        ).astype(np.float64)
        scores = (
            scores
            * (np.maximum(lengths, 1.0) / conf.EXCERPT_LENGTH_REFERENCE) ** -conf.EXCERPT_LENGTH_EXPONENT
        )

    if conf.RECALL_SECOND_PASS > 0 and scores.size:
        scores = _second_pass(
            index, query_terms, scores, records, nodes, (kind_order, ids, node_index), keep, statistics
        )

    def candidate(position: int) -> Candidate:
        score = float(scores[position])
        if position < records.size:
            row = int(records[position])
            kind, id = index.kinds[row], int(index.ids.array[row])
            own = index.records.matrix.array[row] if with_vectors else None
            if index.pending.array[row]:
                return Candidate(kind, id, PENDING, None, *opening(index.texts[row]), score, (), own)
            return Candidate(kind, id, WHOLE, None, 0, len(index.texts[row]), score, (), own)
        node_row = int(nodes[position - records.size])
        row = int(index.node_owner.array[node_row])
        start, end = (int(v) for v in index.node_spans.array[node_row])
        parts = [
            (int(a), int(b), float(scored.passages[p]))
            for p in index.passages_of(node_row)
            for a, b in [index.passage_spans.array[p]]
        ]
        return Candidate(
            index.kinds[row],
            int(index.ids.array[row]),
            NODE,
            int(index.node_index.array[node_row]),
            start,
            end,
            score,
            parts,
            index.nodes.matrix.array[node_row] if with_vectors else None,
        )

    with_vectors = vector is not None and conf.RECALL_REDUNDANCY > 0
    ordered = (candidate(int(p)) for p in _best_first(scores, kind_order, ids, node_index, 4 * most + 8))
    return ordered, text_of, choose


def _second_pass(
    index: RecallIndex,
    query_terms: list[str],
    scores: np.ndarray,
    records: np.ndarray,
    nodes: np.ndarray,
    ties: tuple[np.ndarray, np.ndarray, np.ndarray],
    keep: np.ndarray | None,
    statistics: KeptStatistics | None,
) -> np.ndarray:
    """The candidates' scores after a second search with what the first found (`memory_app.expansion`):
    the names and numbers of the `RECALL_SECOND_PASS_FROM` best candidates, searched alone (BM25 with
    the agent's statistics, normalised by the fusion's bound: the hop from the first evidence to the
    second is by those words, not the question's), and merged with the first pass as
    (1 - w) * first + w * second, w = `RECALL_SECOND_PASS`. Unchanged when the best candidates hold no
    such term.

    The recall's filters pass through: `keep` and its `statistics` (None when unfiltered) score the
    second search as the first, so a filtered-out record neither comes back nor weighs on a term's idf."""
    first = top_rows(scores, scores > 0, conf.RECALL_SECOND_PASS_FROM, ties=ties)
    texts = []
    for position in first.tolist():
        if position < records.size:
            texts.append(index.texts[int(records[position])][: conf.OPENING_LENGTH * 4])
        else:
            node_row = int(nodes[position - records.size])
            start, end = (int(v) for v in index.node_spans.array[node_row])
            texts.append(index.texts[int(index.node_owner.array[node_row])][start:end])
    found = found_terms(
        texts,
        query_terms,
        (statistics or index.statistics).idf,
        most=conf.RECALL_SECOND_PASS_TERMS,
        least_idf=conf.RECALL_SECOND_PASS_LEAST_IDF,
        analyze=index.terms,
    )
    if not found:
        return scores
    again = index.level_scores(
        found, None, conf.RECALL_FUSION_WEIGHT, conf.NODE_SCORE_MIX, keep=keep, statistics=statistics
    )
    second = np.concatenate([again.records[records], again.nodes[nodes]])
    weight = conf.RECALL_SECOND_PASS
    return (1.0 - weight) * scores + weight * second


def _reranked(
    head: list[Candidate], question: str, text_of: Callable[[str, int], str]
) -> tuple[Iterator[Candidate], dict]:
    """The first `RERANK_DEPTH` (at least `most`) candidates, `head`, in the reranker's order.

    The shared rerank step (`ragsite.model_calls.rerank.reorder`) reads each candidate's text; the
    excerpts keep their fused scores, and the reranker only decides the order, as in collection
    search. A recall names no agent to charge (there is no `onBehalfOf`), so the call is recorded
    nowhere. It is made without the agent's index lock (`recall` holds the texts it needs), so the
    agent's other recalls do not wait for it.
    """
    texts = [text_of(c.kind, c.id)[c.start : c.end] for c in head]
    step = reorder(question, texts, settings=settings, who="a memory recall")
    if step.order is None:
        return iter(head), step.status
    return (head[i] for i in step.order), step.status


def _best_first(
    scores: np.ndarray, kind_order: np.ndarray, ids: np.ndarray, node_index: np.ndarray, first: int
):
    """Positions of the positive scores, best first, ties by kind, id, node (`ragsite.top.top_rows`):
    the first `first`, then, should the selection take them all, four times as many, and so on."""
    positive = scores > 0
    total, given, k = int(positive.sum()), 0, first
    while given < total:
        chosen = top_rows(scores, positive, k, ties=(kind_order, ids, node_index))
        yield from chosen[given:].tolist()
        given = chosen.size
        k *= 4
