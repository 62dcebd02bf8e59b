"""An agent's recall index that a write updates in place: records, their nodes, the nodes' passages.

Pure: numpy, the shared BM25 formula and fusion; no models, no settings. `services.recall` reads
rows and feeds them in; this module keeps them and scores a question against all three levels.

Why in place: rebuilding an index of 100,000 records after every write took seconds (most of it
tokenising every text and building the postings again), and an agent that writes between two
recalls paid it each time. Here a write removes the changed record's rows and appends its new
ones, and the lexical statistics (document frequencies, live count, average length) move with it,
so the scores stay those of a fresh build.

Layout, per level (records, nodes, passages): rows are appended and never reordered; a removed
row is dead (its postings' term frequencies set to 0 and its vector to zeros, so it scores 0, and
recall leaves score-0 rows out). Postings are a CSR block built at the last compaction plus short
per-term lists for rows added since; the block is rebuilt once the lists hold a quarter as many
postings as it does, so the lists stay short and the rebuild cost is spread over many writes.

BM25 is the seed's formula (`ragsite.lexical`), with each posting's weight computed at question
time from its term frequency and document length: weights precomputed at build time would all
move whenever the average length does, that is on every write. Nodes and passages are scored with
the records' statistics (idf and average length), as `BM25Index.scored_as` does for a fixed index.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain

import numpy as np

from ragsite.fusion import hybrid_scores
from ragsite.lexical import DEFAULT_B, DEFAULT_K1, idf, terms

# The per-term lists are folded into the CSR block once they hold this many postings, or a quarter
# of the block if that is more: rebuild cost spread over many writes, lists short at question time.
COMPACT_AT = 1_000


class _Growing:
    """A 1-d or 2-d numpy array that appends in amortised constant time."""

    def __init__(self, dtype, width: int | None = None) -> None:
        self.width = width
        shape = (16,) if width is None else (16, width)
        self._data = np.zeros(shape, dtype=dtype)
        self.size = 0

    def append(self, values) -> None:
        values = np.asarray(values, dtype=self._data.dtype)
        count = values.shape[0]
        if self.size + count > self._data.shape[0]:
            # An eighth to spare beyond what is needed, and at least half again: a 100,000-row matrix
            # is copied once every few thousand writes, not on the first one after a load.
            needed = self.size + count
            capacity = max(needed + needed // 8, self._data.shape[0] * 3 // 2)
            grown = np.zeros((capacity, *self._data.shape[1:]), self._data.dtype)
            grown[: self.size] = self._data[: self.size]
            self._data = grown
        self._data[self.size : self.size + count] = values
        self.size += count

    @property
    def array(self) -> np.ndarray:
        """A view of the filled part (it becomes stale after the next append)."""
        return self._data[: self.size]


class Postings:
    """Term postings of a growing list of spans; `vocabulary` maps a term to its id across levels."""

    def __init__(self, vocabulary: dict[str, int]) -> None:
        self.vocabulary = vocabulary
        self.doc_len = _Growing(np.float64)
        self.row_terms: list[list[str]] = []  # each row's terms: what removing it must undo
        self._indptr = np.zeros(1, dtype=np.int64)  # CSR block over term ids < len(indptr) - 1
        self._doc = np.zeros(0, dtype=np.int64)
        self._tf = np.zeros(0, dtype=np.float64)
        self._extra: dict[int, tuple[list[int], list[float]]] = {}
        self._extra_count = 0

    @property
    def rows(self) -> int:
        return len(self.row_terms)

    def add(self, term_lists: list[list[str]]) -> np.ndarray:
        """Append one row per term list; answers the term id of each new (term, row) posting."""
        first, count = self.rows, len(term_lists)
        self.row_terms.extend(term_lists)
        sizes = np.fromiter(map(len, term_lists), dtype=np.int64, count=count)
        self.doc_len.append(sizes)
        for term in set(chain.from_iterable(term_lists)):
            self.vocabulary.setdefault(term, len(self.vocabulary))
        # Flattened in C (chain, map, fromiter, unique), as BM25Index.from_terms does: a Python
        # loop over every token was most of a load.
        ids = np.fromiter(
            map(self.vocabulary.__getitem__, chain.from_iterable(term_lists)), np.int64, int(sizes.sum())
        )
        stride = first + count
        keys, tf = np.unique(
            ids * stride + np.repeat(np.arange(first, stride, dtype=np.int64), sizes), return_counts=True
        )
        terms_of, docs = keys // stride, keys % stride
        if count > COMPACT_AT or self._extra_count + keys.size > max(COMPACT_AT, self._doc.size // 4):
            self._merge(terms_of, docs, tf.astype(np.float64))
        else:
            for term_id, doc, frequency in zip(terms_of.tolist(), docs.tolist(), tf.tolist(), strict=True):
                extra_docs, extra_tfs = self._extra.setdefault(term_id, ([], []))
                extra_docs.append(doc)
                extra_tfs.append(float(frequency))
            self._extra_count += keys.size
        return terms_of

    def remove(self, row: int) -> tuple[np.ndarray, int]:
        """Zero a row's postings (it then adds nothing to any score); answers its term ids and length."""
        counts = Counter(self.row_terms[row])
        blocked = self._indptr.size - 1
        for term in counts:
            term_id = self.vocabulary[term]
            if term_id < blocked:
                lo, hi = self._indptr[term_id], self._indptr[term_id + 1]
                at = lo + int(np.searchsorted(self._doc[lo:hi], row))
                if at < hi and self._doc[at] == row:
                    self._tf[at] = 0.0
                    continue
            docs, tfs = self._extra[term_id]
            tfs[docs.index(row)] = 0.0
        length = len(self.row_terms[row])
        self.row_terms[row] = []
        self.doc_len.array[row] = 0.0
        return np.fromiter((self.vocabulary[term] for term in counts), np.int64, len(counts)), length

    def _merge(self, terms_of: np.ndarray, docs: np.ndarray, tfs: np.ndarray) -> None:
        """One CSR block from the block, the per-term lists and these postings; dead postings dropped."""
        parts = [
            (
                np.repeat(np.arange(self._indptr.size - 1, dtype=np.int64), np.diff(self._indptr)),
                self._doc,
                self._tf,
            ),
            (terms_of, docs, tfs),
        ]
        for term_id, (extra_docs, extra_tfs) in self._extra.items():
            parts.append(
                (
                    np.full(len(extra_docs), term_id, np.int64),
                    np.asarray(extra_docs, np.int64),
                    np.asarray(extra_tfs, np.float64),
                )
            )
        all_terms, all_docs, all_tfs = (np.concatenate(column) for column in zip(*parts, strict=True))
        live = all_tfs > 0
        all_terms, all_docs, all_tfs = all_terms[live], all_docs[live], all_tfs[live]
        order = np.lexsort((all_docs, all_terms))
        self._indptr = np.zeros(len(self.vocabulary) + 1, dtype=np.int64)
        np.cumsum(np.bincount(all_terms, minlength=len(self.vocabulary)), out=self._indptr[1:])
        self._doc, self._tf = all_docs[order], all_tfs[order]
        self._extra, self._extra_count = {}, 0

    def postings(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, term frequencies) of one term, dead rows included with frequency 0."""
        docs, tfs = self._doc[:0], self._tf[:0]
        if term_id < self._indptr.size - 1:
            lo, hi = self._indptr[term_id], self._indptr[term_id + 1]
            docs, tfs = self._doc[lo:hi], self._tf[lo:hi]
        extra = self._extra.get(term_id)
        if extra:
            docs = np.concatenate([docs, np.asarray(extra[0], dtype=np.int64)])
            tfs = np.concatenate([tfs, np.asarray(extra[1], dtype=np.float64)])
        return docs, tfs


class Level:
    """One level's rows: postings, vectors of one width (zeros where a row has none), and liveness."""

    def __init__(self, vocabulary: dict[str, int], width: int) -> None:
        self.postings = Postings(vocabulary)
        self.matrix = _Growing(np.float32, width)
        self.has_vector = _Growing(bool)
        self.alive = _Growing(bool)
        self.vectors = 0  # live rows that have a vector
        # A term's postings and their BM25 weights, computed by the first question that uses the
        # term since the last write (a write moves the average length, and so every weight).
        self.weights: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def add(self, term_lists: list[list[str]], vectors: list[np.ndarray | None]) -> np.ndarray:
        width = self.matrix.width
        usable = [v is not None and v.shape == (width,) for v in vectors]
        block = np.zeros((len(vectors), width), np.float32)
        rows = np.flatnonzero(usable)
        if rows.size:
            block[rows] = np.stack([vectors[row] for row in rows.tolist()])
        self.matrix.append(block)
        self.has_vector.append(usable)
        self.alive.append([True] * len(vectors))
        self.vectors += sum(usable)
        return self.postings.add(term_lists)

    def remove(self, row: int) -> tuple[np.ndarray, int]:
        self.vectors -= int(self.has_vector.array[row] and self.alive.array[row])
        self.alive.array[row] = False
        self.has_vector.array[row] = False
        self.matrix.array[row] = 0.0
        return self.postings.remove(row)

    def cosine(self, vector: np.ndarray) -> np.ndarray:
        return (self.matrix.array @ vector).astype(np.float64)


class Statistics:
    """The records' BM25 statistics, kept exact as records come and go."""

    def __init__(self, vocabulary: dict[str, int], k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> None:
        self.k1, self.b = k1, b
        self.vocabulary = vocabulary
        self.df = np.zeros(0, dtype=np.int64)  # by term id: live records holding the term
        self.count = 0
        self.length = 0

    def add(self, posting_terms: np.ndarray, rows: int, length: int) -> None:
        """Count new records in: the term id of each of their (term, record) postings, and their sizes."""
        added = np.bincount(posting_terms, minlength=len(self.vocabulary))
        if self.df.size < added.size:
            self.df = np.concatenate([self.df, np.zeros(added.size - self.df.size, np.int64)])
        self.df[: added.size] += added
        self.count += rows
        self.length += length

    def remove(self, term_ids: np.ndarray, length: int) -> None:
        self.df[term_ids] -= 1
        self.count -= 1
        self.length -= length

    @property
    def avgdl(self) -> float:
        return self.length / self.count if self.count else 0.0

    def frequency(self, term: str) -> int:
        term_id = self.vocabulary.get(term)
        return int(self.df[term_id]) if term_id is not None and term_id < self.df.size else 0

    def idf(self, term: str) -> float:
        return float(idf(self.count, np.asarray([self.frequency(term)]))[0])

    def upper_bound(self, query_terms: list[str]) -> float:
        """`BM25Index.upper_bound` over the live records: sum of idf(q) * (k1 + 1), repeats counted."""
        return sum(self.idf(term) * count for term, count in Counter(query_terms).items()) * (self.k1 + 1)

    # Whether `scores` may keep a term's weights on the level for the next question (the full
    # statistics only: a subset's average length gives other weights).
    cached = True

    def scores(self, level: Level, query_terms: list[str]) -> np.ndarray:
        """BM25 of every row of `level` with these statistics (a term no record holds weighs nothing)."""
        result = np.zeros(level.postings.rows, dtype=np.float64)
        avgdl = self.avgdl
        for term, count in sorted(Counter(query_terms).items()):
            if self.frequency(term) <= 0:
                continue
            term_id = self.vocabulary[term]
            weighed = level.weights.get(term_id) if self.cached else None
            if weighed is None:
                docs, tf = level.postings.postings(term_id)
                dl = level.postings.doc_len.array[docs]
                # The seed's order of operations (see BM25Index._posting_weights).
                weighed = (docs, tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * dl / avgdl)))
                if self.cached:
                    level.weights[term_id] = weighed
            docs, weights = weighed
            if docs.size:
                result[docs] += (count * self.idf(term)) * weights
        return result


@dataclass(slots=True)
class NodeRow:
    """One node as read from the store; `passages` None for a node built before passages existed."""

    index: int
    start: int
    end: int
    vector: np.ndarray | None
    passages: list[tuple[int, int]] | None = None
    passage_vectors: list[np.ndarray | None] = field(default_factory=list)


@dataclass(slots=True)
class RecordRow:
    kind: str
    id: int
    kind_order: int  # ties go by kind (this position), then id
    text: str
    vector: np.ndarray | None
    nodes: list[NodeRow] = field(default_factory=list)
    # Runs past the window but has no nodes of the current model yet: quoted by its opening.
    pending: bool = False
    # What recall's filters read (POSIX seconds, UTC): created_at, and the validity's ends (-inf and
    # +inf when open); the record's tags.
    created: float = 0.0
    valid_from: float = -math.inf
    valid_until: float = math.inf
    tags: tuple[str, ...] = ()


class RecallIndex:
    """An agent's records, their nodes and the nodes' passages, scored together (see the module doc)."""

    def __init__(self, width: int, terms: Callable[[str], list[str]] = terms) -> None:
        self.width = width
        # How a text becomes the keyword leg's terms (an analyzer of ragsite.analyzers; seed 004's by
        # default): the records, nodes, passages and the question are all read with it.
        self.terms = terms
        self.vocabulary: dict[str, int] = {}
        self.statistics = Statistics(self.vocabulary)
        self.records = Level(self.vocabulary, width)
        self.nodes = Level(self.vocabulary, width)
        self.passages = Level(self.vocabulary, width)
        self.texts: list[str] = []
        self.kinds: list[str] = []
        self.row_of: dict[tuple[str, int], int] = {}
        self.ids = _Growing(np.int64)
        self.kind_order = _Growing(np.int64)
        self.pending = _Growing(bool)
        self.created = _Growing(np.float64)
        self.valid_from = _Growing(np.float64)
        self.valid_until = _Growing(np.float64)
        self.tag_rows: dict[str, list[int]] = {}  # a tag's record rows, dead ones included
        self.node_owner = _Growing(np.int64)
        self.node_index = _Growing(np.int64)
        self.node_spans = _Growing(np.int64, 2)
        self.passage_node = _Growing(np.int64)
        self.passage_spans = _Growing(np.int64, 2)
        self._nodes_of: dict[int, list[int]] = {}
        self._passages_of: dict[int, list[int]] = {}

    @property
    def size(self) -> int:
        """Live records."""
        return len(self.row_of)

    @property
    def has_vectors(self) -> bool:
        return bool(self.records.vectors or self.nodes.vectors or self.passages.vectors)

    def put(self, records: list[RecordRow]) -> None:
        """Add records, replacing any already held under the same (kind, id)."""
        self._forget_weights()
        for record in records:
            self.drop(record.kind, record.id)
        first = len(self.texts)
        self.texts.extend(record.text for record in records)
        self.kinds.extend(record.kind for record in records)
        self.ids.append([record.id for record in records])
        self.kind_order.append([record.kind_order for record in records])
        self.pending.append([record.pending and not record.nodes for record in records])
        self.created.append([record.created for record in records])
        self.valid_from.append([record.valid_from for record in records])
        self.valid_until.append([record.valid_until for record in records])
        for row, record in enumerate(records, start=first):
            for tag in record.tags:
                self.tag_rows.setdefault(tag, []).append(row)
        term_lists = [self.terms(record.text) for record in records]
        self.statistics.add(
            self.records.add(term_lists, [r.vector for r in records]), len(records), sum(map(len, term_lists))
        )
        nodes: list[tuple[int, NodeRow]] = []
        for row, record in enumerate(records, start=first):
            self.row_of[(record.kind, record.id)] = row
            # A node past its record's end belongs to an older text (a raw edit the trigger missed).
            held = [node for node in record.nodes if node.end <= len(record.text)]
            nodes.extend((row, node) for node in held)
        first_node = self.node_owner.size
        self.nodes.add(
            [self.terms(self.texts[row][node.start : node.end]) for row, node in nodes],
            [node.vector for _row, node in nodes],
        )
        self.node_owner.append([row for row, _node in nodes])
        self.node_index.append([node.index for _row, node in nodes])
        self.node_spans.append(
            np.asarray([(node.start, node.end) for _row, node in nodes], np.int64).reshape(-1, 2)
        )
        passages: list[tuple[int, tuple[int, int], np.ndarray | None]] = []
        for node_row, (row, node) in enumerate(nodes, start=first_node):
            self._nodes_of.setdefault(row, []).append(node_row)
            spans = node.passages or []
            vectors = node.passage_vectors if len(node.passage_vectors) == len(spans) else [None] * len(spans)
            passages.extend((node_row, span, vector) for span, vector in zip(spans, vectors, strict=True))
        first_passage = self.passage_node.size
        self.passages.add(
            [self.terms(self.texts[self.node_owner.array[n]][a:b]) for n, (a, b), _v in passages],
            [vector for _n, _span, vector in passages],
        )
        self.passage_node.append([node_row for node_row, _span, _vector in passages])
        self.passage_spans.append(np.asarray([span for _n, span, _v in passages], np.int64).reshape(-1, 2))
        for passage_row, (node_row, _span, _vector) in enumerate(passages, start=first_passage):
            self._passages_of.setdefault(node_row, []).append(passage_row)

    def drop(self, kind: str, id: int) -> None:
        """Remove a record and its nodes and passages, if held."""
        row = self.row_of.pop((kind, id), None)
        if row is None:
            return
        self._forget_weights()
        self.statistics.remove(*self.records.remove(row))
        self.texts[row] = ""
        for node_row in self._nodes_of.pop(row, []):
            self.nodes.remove(node_row)
            for passage_row in self._passages_of.pop(node_row, []):
                self.passages.remove(passage_row)

    def _forget_weights(self) -> None:
        for level in (self.records, self.nodes, self.passages):
            level.weights.clear()

    def level_scores(
        self,
        query_terms: list[str],
        vector: np.ndarray | None,
        weight: float,
        mix: tuple[float, float, float] = (0.0, 0.0, 0.0),
        keep: np.ndarray | None = None,
        statistics: Statistics | None = None,
    ) -> LevelScores:
        """The fused score of every record, node and passage row, each scored like a record.

        A row's score is its cosine and its BM25 with the records' statistics (idf, average
        length), fused by `ragsite.fusion.hybrid_scores`. A node's is the best of itself and its
        passages, mixed with `mix` = (a, b, c): (best + a * itself + b * its second-best passage +
        c * its record) / (1 + a + b + c), still in [0, 1], and with (0, 0, 0) the best alone.
        Dead rows score 0. Nothing here depends on another agent: an index holds one agent's records.

        `keep` (`memory_app.filters.kept`), when given, is the records a recall's filters keep, and
        `statistics` theirs alone (`filters.KeptStatistics`): every other record, node and passage
        scores 0, so the scores are those of an index holding only the kept records.
        """
        statistics = statistics or self.statistics
        upper = statistics.upper_bound(query_terms)

        def fused(level: Level) -> np.ndarray:
            cosine = None if vector is None else level.cosine(vector)
            return hybrid_scores(cosine, statistics.scores(level, query_terms), upper, weight=weight)[0]

        records = fused(self.records)
        nodes = fused(self.nodes) if self.nodes.alive.size else np.zeros(0)
        passages = fused(self.passages) if self.passages.alive.size else np.zeros(0)
        own = nodes.copy()
        second = np.zeros_like(nodes)
        if passages.size:
            live = np.flatnonzero(self.passages.alive.array)
            owner, score = self.passage_node.array[live], passages[live]
            # Each node's passages best first: the first of a node's run is its best, the next its second.
            order = np.lexsort((-score, owner))
            owner, score = owner[order], score[order]
            first = np.ones(owner.size, dtype=bool)
            first[1:] = owner[1:] != owner[:-1]
            np.maximum.at(nodes, owner[first], score[first])
            follows = np.flatnonzero(~first[1:] & first[:-1]) + 1
            second[owner[follows]] = score[follows]
        a, b, c = mix
        if nodes.size and (a or b or c):
            record_of_node = records[self.node_owner.array] if records.size else np.zeros_like(nodes)
            nodes = (nodes + a * own + b * second + c * record_of_node) / (1.0 + a + b + c)
            nodes[~self.nodes.alive.array] = 0.0
        if keep is not None:
            records[~keep] = 0.0
            if nodes.size:
                node_kept = keep[self.node_owner.array]
                nodes[~node_kept] = 0.0
                if passages.size:
                    passages[~node_kept[self.passage_node.array]] = 0.0
        return LevelScores(records, nodes, passages)

    def divided(self) -> np.ndarray:
        """Per record row: whether it holds live nodes (it is then quoted by them, never whole)."""
        held = np.zeros(self.ids.size, dtype=bool)
        alive = np.flatnonzero(self.nodes.alive.array)
        held[self.node_owner.array[alive]] = True
        return held

    def passages_of(self, node_row: int) -> list[int]:
        return self._passages_of.get(node_row, [])


@dataclass(slots=True)
class LevelScores:
    """Fused scores by row of each level of a `RecallIndex` (a node's already the best of its passages)."""

    records: np.ndarray
    nodes: np.ndarray
    passages: np.ndarray
