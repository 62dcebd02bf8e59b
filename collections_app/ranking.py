"""The one ranking step: fuse each row's scores, keep the readable rows at or above the floor, take the
top k, and hand the hits to stitching and the answer budget. Search (every path), measure's variants and
known answers all rank here and fit the same budget (`text.budget.fit`), so what a variant or a known
answer finds is what a search would answer.

It reads an index through `Scorable`, which both the mapped index of a build (`index.mapped`) and
measure's in-memory `ScratchIndex` implement. Pure: no models, no settings; the caller passes the
fusion weight (`ragsite.fusion.FUSION_WEIGHT`).

An index built with ENTRIES holds the entries of its lists, tables and Q/A runs as rows of their own
(``index.entries``, `text.entries`): each entry is fused as a row is (its BM25 over the entries with its
row's context, its vector), and a row is scored by itself and its best entry (`ENTRY_SHARE`), so the
paragraph holding the one option asked for is not outranked by one that repeats the question's words.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ragsite.fusion import clears_floor, floor_is_open, hybrid_scores, normalise_bm25
from ragsite.top import top_rows

from .text.budget import fit
from .text.stitch import Row, Stitched, stitch, stitch_sections

# The share of what a row's best entry adds over the row's own score on each leg (cosine, BM25 on
# [0, 1]) that counts: 1 reads each leg as the better of the row and its best entry there, 0 ignores
# entries. Measured on the dev set, the man shelf and SciFact (docs/decisions/0089-entries-as-units.md).
ENTRY_SHARE = 1.0


class Scorable(Protocol):
    """What ranking reads of an index. ``view`` is a reader's view of the rows (`index.mapped.View`);
    an index without views takes None only. An index may also have ``entries`` (a Scorable whose rows are
    entries), ``entry_row`` (each entry's row, ascending) and ``entry_span`` (its span in the row's text);
    one without them is ranked on its rows alone."""

    @property
    def size(self) -> int: ...

    def lexical(self, question_terms: list[str], view: Any = None) -> tuple[np.ndarray, float]:
        """Every row's lexical score (BM25 with its context's share) and the question's upper bound."""

    def row_cosines(self, vector: np.ndarray, rows: np.ndarray | None = None, view: Any = None) -> np.ndarray:
        """The pooled cosine of each of ``rows`` (None: every row); 0 for a row without a vector."""


@dataclass(frozen=True)
class Lexical:
    """Every row's lexical score and the bound that maps it onto [0, 1] (`fusion.normalise_bm25`)."""

    scores: np.ndarray
    upper: float


@dataclass(frozen=True)
class Entries:
    """Each row's entries as ranking reads them, every array over every row: the best entry's fused score
    (-inf: the row has no entry this search may use) and which entry it is (-1: none); the best entry
    cosine and the best entry BM25 on [0, 1] (`fusion.normalise_bm25` over the entries' own bound), each
    -inf where none or when the question is not read on that leg; every entry's (start, end) within its
    row's text."""

    best: np.ndarray
    entry: np.ndarray
    cosine: np.ndarray | None
    lexical: np.ndarray | None
    spans: np.ndarray

    def focus(self, row: int) -> tuple[int, int] | None:
        """The span of ``row``'s best entry within its text, or None."""
        entry = int(self.entry[row])
        if entry < 0:
            return None
        return int(self.spans[entry, 0]), int(self.spans[entry, 1])


def entry_scores(
    index: Scorable,
    question_terms: list[str] | None,
    vector: np.ndarray | None,
    *,
    weight: float,
    view: Any = None,
) -> Entries | None:
    """Every row's best entry, each entry read on both legs as a row is (its BM25 over the entries this
    search may use, with their rows' context, and its vector); None when the index has no entries."""
    entries = getattr(index, "entries", None)
    if entries is None or not entries.size:
        return None
    owner = np.asarray(index.entry_row, dtype=np.int64)
    mask = None if view is None or view.mask is None else np.asarray(view.mask)[owner]
    entry_view = None if mask is None else entries.view(mask)
    arm = lexical(entries, question_terms, entry_view)
    cosine = None if vector is None else entries.row_cosines(vector, None, entry_view).astype(np.float64)
    bm25 = None if arm is None else normalise_bm25(arm.scores, arm.upper or 0.0)
    scores, _mode = hybrid_scores(
        cosine, None if arm is None else arm.scores, arm.upper if arm else 0.0, weight=weight
    )

    def per_row(values: np.ndarray | None) -> np.ndarray | None:
        if values is None:
            return None
        if mask is not None:
            values = np.where(mask, values, -np.inf)
        best = np.full(index.size, -np.inf, dtype=np.float64)
        np.maximum.at(best, owner, values)
        return best

    best = per_row(scores)
    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
    entry = np.full(index.size, -1, dtype=np.int64)
    winners = np.flatnonzero(np.isfinite(scores) & (scores == best[owner]))[::-1]
    entry[owner[winners]] = winners  # reversed, so the first of tied entries is the one kept
    return Entries(best, entry, per_row(cosine), per_row(bm25), np.asarray(index.entry_span))


def lifted(own: np.ndarray, best: np.ndarray) -> np.ndarray:
    """``own`` with `ENTRY_SHARE` of what ``best`` (-inf: none) adds over it, in ``own``'s type."""
    lift = np.maximum(np.asarray(best, dtype=np.float64) - own, 0.0)
    return (own + ENTRY_SHARE * lift).astype(own.dtype, copy=False)


@dataclass
class Ranking:
    """What ranking found: the rows to answer with, and the fused scores they were chosen by.

    ``scores`` covers every row when ``rows`` is None, else the rows ``rows`` in that order (an
    approximate search's candidates, ascending; a lexical top-k, best first).
    """

    top: np.ndarray  # the rows to answer with, best first
    rows: np.ndarray | None
    scores: np.ndarray
    mode: str
    lexical: Lexical | None = None  # every row's, when computed (explain and the IVF bound read it)
    entries: Entries | None = None  # each row's best entry, when the index has entries
    _at: dict[int, int] | None = field(default=None, init=False, repr=False)

    def score_of(self, row: int) -> float:
        """A row's fused score, whether ``scores`` covers every row or some."""
        if self.rows is None:
            return float(self.scores[row])
        if self._at is None:
            self._at = {int(r): i for i, r in enumerate(self.rows.tolist())}
        return float(self.scores[self._at[int(row)]])

    def scores_of(self, rows: np.ndarray) -> list[float]:
        """The fused scores of some of the scored rows, as `score_of` gives each (one gather, no table
        of every candidate)."""
        rows = np.asarray(rows, dtype=np.int64)
        if self.rows is None or rows.size == 0:
            return self.scores[rows].tolist()
        # Each row's place among the scored ones: a few against a few hundred, compared at once.
        at = (np.asarray(self.rows)[:, None] == rows[None, :]).argmax(axis=0)
        return self.scores[at].tolist()

    def hits(self) -> list[tuple[int, float]]:
        """The top rows with their fused scores, best first: what stitching takes."""
        return list(zip(np.asarray(self.top).tolist(), self.scores_of(self.top), strict=True))

    def focus(self) -> dict[int, tuple[int, int]]:
        """For each top row its best entry scored, that entry's span within the row's text: where its
        excerpt is centred when the answer budget shortens it (`text.budget.fit`, which takes it in the
        document's offsets)."""
        if self.entries is None:
            return {}
        spans = {int(row): self.entries.focus(int(row)) for row in self.top}
        return {row: span for row, span in spans.items() if span is not None}


def lexical(index: Scorable, question_terms: list[str] | None, view: Any = None) -> Lexical | None:
    """The lexical arm over ``view``'s statistics; None when the question is not read lexically."""
    if question_terms is None:
        return None
    scores, upper = index.lexical(question_terms, view)
    return Lexical(scores, upper)


def fused(
    index: Scorable,
    vector: np.ndarray | None,
    lexical_arm: Lexical | None,
    *,
    weight: float,
    view: Any = None,
    rows: np.ndarray | None = None,
    entries: Entries | None = None,
    cosine: np.ndarray | None = None,
) -> tuple[np.ndarray, str]:
    """The fused score in [0, 1] of each of ``rows`` (None: every row), and the mode it was fused in;
    with ``entries``, each leg of a row lifted by its best entry's (`lifted`). ``cosine``: the rows'
    `row_cosines` when the caller has taken them (None: taken here)."""
    if cosine is None and vector is not None:
        cosine = index.row_cosines(vector, rows, view)
    if lexical_arm is None:
        bm25, upper = None, 0.0
    else:
        bm25 = lexical_arm.scores if rows is None else lexical_arm.scores[rows]
        upper = lexical_arm.upper or 0.0
    cosine, bm25 = lifted_legs(cosine, bm25, upper, entries, rows)
    return hybrid_scores(cosine, bm25, upper, weight=weight)


def lifted_legs(
    cosine: np.ndarray | None,
    bm25: np.ndarray | None,
    upper: float,
    entries: Entries | None,
    rows: np.ndarray | None = None,
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The two legs of ``rows`` (None: every row), each lifted by the row's best entry's on that leg
    (`ENTRY_SHARE`): the entry's cosine, and its BM25 on [0, 1] read back onto the row's scale by the row's
    bound ``upper``. What `fused` fuses, and what the playground's explanation shows a piece made of."""
    if entries is None:
        return cosine, bm25

    def of(values: np.ndarray) -> np.ndarray:
        return values if rows is None else values[rows]

    if cosine is not None and entries.cosine is not None:
        cosine = lifted(cosine, of(entries.cosine))
    if bm25 is not None and entries.lexical is not None and upper > 0:
        bm25 = lifted(np.asarray(bm25, dtype=np.float64), of(entries.lexical) * upper)
    return cosine, bm25


def top_at_floor(
    scores: np.ndarray,
    floor: float,
    most: int,
    *,
    readable: np.ndarray | None = None,
    rows: np.ndarray | None = None,
) -> np.ndarray:
    """The ``most`` best rows at or above ``floor``, best first, ties to the lower row.

    ``scores`` covers every row (``rows`` None; ``readable`` the rows this search may use, None: all),
    or the rows ``rows``, all readable (ties then go to the earlier of them).
    """
    if rows is not None:
        return rows[top_rows(scores, None if floor_is_open(floor) else clears_floor(scores, floor), most)]
    # A floor every score clears, over rows all readable: no mask to build or apply.
    if floor_is_open(floor):
        eligible = None if readable is None or readable.all() else readable
    else:
        eligible = clears_floor(scores, floor) if readable is None else readable & clears_floor(scores, floor)
    return top_rows(scores, eligible, most)


def rank(
    index: Scorable,
    question_terms: list[str] | None,
    vector: np.ndarray | None,
    *,
    weight: float,
    most: int,
    floor: float,
    readable: np.ndarray | None = None,
    view: Any = None,
) -> Ranking:
    """Every row scored exactly: fuse, keep the readable ones at or above the floor, take ``most``."""
    lexical_arm = lexical(index, question_terms, view)
    entries = entry_scores(index, question_terms, vector, weight=weight, view=view)
    scores, mode = fused(index, vector, lexical_arm, weight=weight, view=view, entries=entries)
    top = top_at_floor(scores, floor, most, readable=readable)
    return Ranking(top=top, rows=None, scores=scores, mode=mode, lexical=lexical_arm, entries=entries)


def ranked_runs(
    index: Scorable,
    question_terms: list[str],
    vector: np.ndarray | None,
    *,
    weight: float,
    most: int,
    floor: float,
    around: int,
    rows: Mapping[int, Row],
    readable: np.ndarray | None = None,
    sections: bool = False,
    max_chars: int | None = None,
    answer_terms: list[str] | None = None,
) -> list[Stitched]:
    """`rank`, then stitch the hits with ``around`` readable neighbours from ``rows`` (by ordinal), or with
    ``sections`` (the parent strategy) and ``around`` above 0 with their sections (`stitch_sections`), and
    fit them to ``max_chars`` characters as a search's answer is (None: no budget). ``answer_terms``: the
    question's seed-004 terms, which choose a shortened hit's part as a search's do (`text.budget`);
    None: ``question_terms``, the same when the index's analyzer is simple."""
    if not index.size:
        return []
    ranking = rank(index, question_terms, vector, weight=weight, most=most, floor=floor, readable=readable)
    hits = ranking.hits()
    runs = stitch_sections(hits, rows) if sections and around > 0 else stitch(hits, rows, around)
    if max_chars is None:
        return runs
    best_first = [row for row, _score in sorted(hits, key=lambda hit: -hit[1])]
    chosen_by = question_terms if answer_terms is None else answer_terms
    focus = {
        row: (rows[row].start + a, rows[row].start + b)
        for row, (a, b) in ranking.focus().items()
        if row in rows
    }
    return fit(runs, rows, max_chars, best_first, chosen_by, focus=focus).runs


__all__ = [
    "ENTRY_SHARE",
    "Entries",
    "Lexical",
    "Ranking",
    "Scorable",
    "clears_floor",
    "entry_scores",
    "fused",
    "lexical",
    "lifted",
    "lifted_legs",
    "rank",
    "ranked_runs",
    "top_at_floor",
]
