"""The one ranking step: fuse each row's scores, keep the readable rows at or above the floor, take the
top k, and hand the hits to stitching and the answer budget. Search (every path), measure's variants and
known answers all rank here and fit the same budget (`text.budget.fit`), so what a variant or a known
answer finds is what a search would answer.

It reads an index through `Scorable`, which both the mapped index of a build (`index.mapped`) and
measure's in-memory `ScratchIndex` implement. Pure: no models, no settings; the caller passes the
fusion weight (`ragsite.fusion.FUSION_WEIGHT`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from ragsite.fusion import clears_floor, floor_is_open, hybrid_scores
from ragsite.top import top_rows

from .text.budget import fit
from .text.stitch import Row, Stitched, stitch, stitch_sections


class Scorable(Protocol):
    """What ranking reads of an index. ``view`` is a reader's view of the rows (`index.mapped.View`);
    an index without views takes None only."""

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
    _at: dict[int, int] | None = field(default=None, init=False, repr=False)

    def score_of(self, row: int) -> float:
        """A row's fused score, whether ``scores`` covers every row or some."""
        if self.rows is None:
            return float(self.scores[row])
        if self._at is None:
            self._at = {int(r): i for i, r in enumerate(self.rows.tolist())}
        return float(self.scores[self._at[int(row)]])

    def hits(self) -> list[tuple[int, float]]:
        """The top rows with their fused scores, best first: what stitching takes."""
        return [(int(row), self.score_of(row)) for row in self.top]


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
) -> tuple[np.ndarray, str]:
    """The fused score in [0, 1] of each of ``rows`` (None: every row), and the mode it was fused in."""
    cosine = None if vector is None else index.row_cosines(vector, rows, view)
    if lexical_arm is None:
        bm25, upper = None, 0.0
    else:
        bm25 = lexical_arm.scores if rows is None else lexical_arm.scores[rows]
        upper = lexical_arm.upper or 0.0
    return hybrid_scores(cosine, bm25, upper, weight=weight)


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
        return rows[top_rows(scores, clears_floor(scores, floor), most)]
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
    scores, mode = fused(index, vector, lexical_arm, weight=weight, view=view)
    top = top_at_floor(scores, floor, most, readable=readable)
    return Ranking(top=top, rows=None, scores=scores, mode=mode, lexical=lexical_arm)


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
    return fit(runs, rows, max_chars, best_first, chosen_by).runs


__all__ = [
    "Lexical",
    "Ranking",
    "Scorable",
    "clears_floor",
    "fused",
    "lexical",
    "rank",
    "ranked_runs",
    "top_at_floor",
]
