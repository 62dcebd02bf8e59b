"""A recall's filters (which of the agent's records it reads) and the superseded statements among its
excerpts.

`parse_filters` checks a request's `since`, `until`, `valid_at`, `kinds` and `tags` into the
`Filters` that `kept` turns into a mask of record rows before anything is
scored (docs/memory.md, *Filters, time and superseded statements*). `superseded` marks, among the
excerpts an answer holds, those a newer record restates with other values (`ragsite.slots`).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass

import numpy as np

from ragsite.errors import RagsiteError
from ragsite.slots import conflict, slots_of

from .recall_index import Level, RecallIndex, Statistics
from .services.common import validate_kinds, validate_moment, validate_tags


def parse_filters(since, until, valid_at, kinds, tags) -> Filters:
    """A recall's filters, checked (400 `invalid_<name>`), as `kept` reads them."""

    def seconds(value, name: str) -> float | None:
        moment = validate_moment(value, name)
        return None if moment is None else moment.timestamp()

    if tags is not None and not tags:
        raise RagsiteError("tags, when given, names at least one tag", code="invalid_tags")
    return Filters(
        since=seconds(since, "since"),
        until=seconds(until, "until"),
        valid_at=seconds(valid_at, "valid_at"),
        kinds=validate_kinds(kinds),
        tags=tuple(validate_tags(tags)),
    )


def superseded(excerpts: list[dict], index: RecallIndex) -> list[dict]:
    """The excerpts with each one another restates (`ragsite.slots.restated`: one slot, other values)
    marked `superseded_by` that record, which is moved up to just before it when it ranked lower;
    nothing is added or removed.

    Of two records, the later is the one whose statement began to hold later: `valid_from` when the
    record has one, else `created_at` (then the id). Excerpts of one record never supersede each
    other, and a record the index no longer holds (a rerank's answer after a write) is left as it is.
    """
    if len(excerpts) < 2:
        return excerpts

    def stated(excerpt: dict) -> tuple[float, int] | None:
        row = index.row_of.get((excerpt["kind"], excerpt["id"]))
        if row is None:
            return None
        start = float(index.valid_from.array[row])
        return (start if math.isfinite(start) else float(index.created.array[row]), excerpt["id"])

    times = [stated(excerpt) for excerpt in excerpts]
    keys = [(excerpt["kind"], excerpt["id"]) for excerpt in excerpts]
    slots = [slots_of(excerpt["text"]) for excerpt in excerpts]
    newest: dict[int, int] = {}  # an excerpt's position -> the position of the newest restating it
    for older, when in enumerate(times):
        for newer, later in enumerate(times):
            if (
                when is None
                or later is None
                or not later > when
                or not slots[older]
                or not slots[newer]
                or keys[older] == keys[newer]
                or not conflict(slots[older], slots[newer])
            ):
                continue
            if older not in newest or later > times[newest[older]]:
                newest[older] = newer
    if not newest:
        return excerpts
    for older, newer in newest.items():
        excerpts[older]["superseded_by"] = {"kind": excerpts[newer]["kind"], "id": excerpts[newer]["id"]}
    # The newer excerpt takes the older one's place, just before it, when it was ranked lower; the
    # others keep their order.
    order = list(range(len(excerpts)))
    for older, newer in sorted(newest.items()):
        if order.index(newer) > order.index(older):
            order.remove(newer)
            order.insert(order.index(older), newer)
    return [excerpts[position] for position in order]


class KeptStatistics(Statistics):
    """The records' BM25 statistics over the rows a recall's filters keep, as a store holding only
    those records would have them: their count, their total length, and each question term's
    document frequency among them (counted when asked, from the records' postings)."""

    cached = False

    def __init__(self, full: Statistics, records: Level, keep: np.ndarray) -> None:
        super().__init__(full.vocabulary, full.k1, full.b)
        self._records, self._keep = records, keep
        self.count = int(keep.sum())
        self.length = int(records.postings.doc_len.array[keep].sum())
        self._frequency: dict[str, int] = {}

    def frequency(self, term: str) -> int:
        if term not in self._frequency:
            term_id = self.vocabulary.get(term)
            held = 0
            if term_id is not None:
                docs, tf = self._records.postings.postings(term_id)
                held = int(np.count_nonzero(self._keep[docs] & (tf > 0)))
            self._frequency[term] = held
        return self._frequency[term]


@dataclass(frozen=True, slots=True)
class Filters:
    """Which of an agent's records a recall reads; None (or empty) for a filter not given.

    Times are POSIX seconds (UTC). `since`/`until` bound the creation time, [since, until);
    `valid_at` keeps the records whose validity [valid_from, valid_until) holds it (an open end
    holds everything on its side); `kinds` keeps the records of those kinds; `tags` those carrying
    every one of them."""

    since: float | None = None
    until: float | None = None
    valid_at: float | None = None
    kinds: Collection[str] | None = None
    tags: Collection[str] = ()

    @property
    def any(self) -> bool:
        return (
            self.since is not None
            or self.until is not None
            or self.valid_at is not None
            or self.kinds is not None
            or bool(self.tags)
        )


def kept(index: RecallIndex, filters: Filters) -> np.ndarray | None:
    """Per record row: whether it is alive and `filters` keep it; None when no filter is given."""
    if not filters.any:
        return None
    keep = index.records.alive.array.copy()
    if filters.since is not None:
        keep &= index.created.array >= filters.since
    if filters.until is not None:
        keep &= index.created.array < filters.until
    if filters.valid_at is not None:
        keep &= (index.valid_from.array <= filters.valid_at) & (filters.valid_at < index.valid_until.array)
    if filters.kinds is not None:
        keep &= np.fromiter((kind in filters.kinds for kind in index.kinds), bool, len(index.kinds))
    for tag in filters.tags:
        tagged = np.zeros(keep.size, dtype=bool)
        tagged[index.tag_rows.get(tag, [])] = True
        keep &= tagged
    return keep


def has_vectors_in(index: RecallIndex, keep: np.ndarray | None) -> bool:
    """`has_vectors` over the kept records (with their nodes and passages) alone."""
    if keep is None:
        return index.has_vectors
    if (index.records.has_vector.array & keep).any():
        return True
    node_kept = keep[index.node_owner.array] if index.node_owner.size else np.zeros(0, bool)
    if (index.nodes.has_vector.array & node_kept).any():
        return True
    if index.passage_node.size:
        return bool((index.passages.has_vector.array & node_kept[index.passage_node.array]).any())
    return False
