"""The k best rows by seed 004's BM25 without scoring every row: the common terms' postings are read only
for the rows that can still reach the top.

A SciFact question's terms touch about 290,000 postings at 100,000 rows, and 85 % of them belong to the
three or four terms that occur in more than an eighth of the rows ("the", "of", "in"): terms whose idf
is small, so that they can lift a row by little. Summing every posting into a dense array of N
(`MappedIndex.bm25`) is most of a lexical search. Here (the idea of Turtle & Flood's MaxScore, 1995,
done in bulk rather than row by row):

1. the *rare* terms' postings are summed into a dense partial score, as `MappedIndex.bm25` does;
2. no term's share is negative, so k rows score at least the k-th best partial score, ``theta``:
   the k-th best score is at least that;
3. each common term lifts a row by less than ``idf (k1 + 1)`` times its count, so a row whose partial
   score plus the common terms' ceilings stays below ``theta`` cannot reach the top; only the others
   (20-40 rows at 100,000, typically) are scored exactly, only the blocks of each term's postings that
   may hold them unpacked (`packed.PackedPostings.find`).

Exactness: a row's exact score is summed term by term in term-id order, each term's share being
``(count idf) * weight``, the weight computed from tf and the row's length (`format.weights_of`): the
operations and order of
`MappedIndex.bm25` (and so of `lexical.BM25Index`), so the same bits. The rows returned are every
eligible row whose score is at least ``(1 - 1e-9)`` times the k-th best, a margin wider than any rounding of
the bound, so that a transform applied after (the fused score) cannot tie in a row left out
(`top.top_of_superset`). A context field ("title › section", context.py) is scored over every row as
the search scores it and added in the same way (it only raises a row, so the partial score stays a
lower bound). Only the all-rows view takes this path; otherwise (or when pruning
would not pay) :func:`bm25_top` returns None and the caller scores densely.

Pure: numpy only; no models, no settings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import lru_cache

import numpy as np

from ragsite.lexical import idf
from ragsite.top import MARGIN, positive_tail, top_of_superset

from ..text.context import lexical_with_context
from .format import weights_of

# A term in more than 1/COMMON of the rows is a common one: left out of the dense partial score.
COMMON = 8
# Below this many rows the dense sum is kept: pruning's fixed steps cost what it saves (10,000 rows:
# 1.08x the dense sum's time, against 0.58x at 100,000; 100 SciFact questions, interleaved).
LEAST_ROWS = 1 << 15
# Past this share of the rows as candidates, searching each term's postings for them costs more than
# summing every posting: score densely instead.
MOST_CANDIDATES = 16


def bm25_top(
    index, query_terms: Iterable[str], k: int, eligible: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, float] | None:
    """Rows (ascending) holding the ``k`` best eligible rows of ``index`` (a ``MappedIndex``) by BM25 over
    all its rows (with its context's share, as search adds it), their exact scores, and the question's
    upper bound; None when not worth it.

    Every eligible row scoring at least ``(1 - MARGIN)`` times the k-th best eligible score is among the
    rows returned (more may be). ``eligible`` None: every row.
    """
    if k <= 0 or index.size < LEAST_ROWS:
        return None
    query_terms = list(query_terms)
    question, bound = _question(index, query_terms)
    common = [term for term in question if term[2] - term[1] > index.size // COMMON]
    if not common or eligible is not None and np.count_nonzero(eligible) <= k:
        return None  # nothing to leave out, or every eligible row is wanted anyway
    norms = index.norms()
    partial = np.zeros(index.size, dtype=np.float64)
    read = {}  # the rare terms' postings, read whole here and searched again for the candidates
    for term_id, lo, hi, coefficient in question:
        if hi - lo <= index.size // COMMON:
            docs, tf = read[term_id] = index.packed.term(term_id, keep=True)
            np.add.at(partial, docs, coefficient * weights_of(tf, np.take(norms, docs), index.k1))
    with_context = _with_context(index, query_terms, bound)
    partial = with_context(partial, None)  # a context's share is no less than nothing: still a lower bound
    # A row's score is its partial one plus the common terms' shares (none negative), so k rows score at
    # least the k-th best partial score (less a margin far wider than the sums' rounding): theta.
    scored = partial if eligible is None else np.where(eligible, partial, 0.0)
    kth, low, near = positive_tail(scored, k)
    theta = kth * (1 - 10 * MARGIN)
    # tf (k1 + 1) / (tf + K) < k1 + 1 for K > 0: each common term's ceiling, widened past its rounding.
    ceiling = sum(term[3] for term in common) * (index.k1 + 1) * (1 + MARGIN)
    cut = theta * (1 - 10 * MARGIN) - ceiling
    if cut <= 0:
        return None  # every row could still reach the top (fewer than k rows hold a rare term, say)
    # Every eligible row reaching the cut (ineligible ones score 0 here, below it); usually all of them
    # are among those at or above the tail's bound, already found.
    rows = near[scored[near] >= cut] if cut >= low else np.flatnonzero(scored >= cut)
    if rows.size > index.size // MOST_CANDIDATES:
        return None
    return rows, with_context(_exact(index, question, rows, read), rows), bound


def _with_context(index, query_terms: list[str], bound: float):
    """``(scores, rows) -> scores`` plus the rows' context share (context.lexical_with_context, element by
    element, so the same bits as over every row); the identity for an index without contexts."""
    if index.context is None:
        return lambda scores, rows: scores
    context, context_bound = index.context.bm25(query_terms)  # the context field's own postings, all rows
    return lambda scores, rows: lexical_with_context(
        scores, bound, context if rows is None else context[rows], context_bound
    )[0]


def best_rows(
    index,
    query_terms: Iterable[str],
    k: int,
    eligible: np.ndarray | None,
    fused: Callable[[np.ndarray, float], np.ndarray],
) -> tuple[np.ndarray, np.ndarray] | None:
    """The ``k`` best eligible rows by ``fused(bm25, bound)``, best first (ties to the lower row), and
    those values, scoring only the rows :func:`bm25_top` keeps; None: score every row instead.

    ``fused`` must never decrease in BM25 (the fused score of BM25 alone, BM25 over the question's
    bound, clipped): then the rows that can reach the top by one reach it by the other
    (top.top_of_superset), and only they are transformed.
    """
    found = bm25_top(index, query_terms, k, eligible)
    if found is None:
        return None
    rows, raw, bound = found
    return top_of_superset(rows, raw, k, lambda scores: fused(scores, bound))


def _question(index, query_terms: Iterable[str]) -> tuple[list[tuple[int, int, int, float]], float]:
    """Each known question term's id, postings ``(lo, hi)`` and ``count * idf``, in term-id order, and the
    upper bound: `MappedIndex.bm25`'s arithmetic for the all-rows view, in its order."""
    counts, _spelled, unknown = index.term_counts(query_terms)
    question, total = [], 0.0
    for term_id in sorted(counts):
        lo, hi = int(index.indptr[term_id]), int(index.indptr[term_id + 1])
        if hi == lo:
            unknown += counts[term_id]
            continue
        term_idf = _idf(index.size, hi - lo)
        total += counts[term_id] * term_idf
        question.append((term_id, lo, hi, counts[term_id] * term_idf))
    if unknown:
        total += unknown * float(idf(index.size, np.zeros(1))[0])
    return question, total * (index.k1 + 1)


@lru_cache(maxsize=1 << 16)
def _idf(n_docs: int, df: int) -> float:
    """``lexical.idf`` of one term as `MappedIndex.bm25` computes it (a one-element array, the same bits),
    remembered: numpy's call costs ~10 us, a twelfth of a pruned search's scoring over twelve terms."""
    return float(idf(n_docs, np.asarray([df]))[0])


def _exact(index, question: list[tuple[int, int, int, float]], rows: np.ndarray, read: dict) -> np.ndarray:
    """The exact BM25 of ``rows`` (ascending; ``question`` not empty): each term's share added in term-id
    order, as the dense sum adds it (a row without the term adds nothing, where the dense sum adds 0.0: the
    same bits). A term's postings come from ``read`` (terms read whole already) or from the blocks that
    may hold the rows (`packed.PackedPostings.find`)."""
    norms = np.take(index.norms(), rows)
    scores = np.zeros(rows.size, dtype=np.float64)
    for term_id, _lo, _hi, coefficient in question:  # term by term, in term-id order, as the dense sum
        if term_id in read:
            docs, tf = read[term_id]
            at = np.minimum(np.searchsorted(docs, rows.astype(docs.dtype)), docs.size - 1)
            holds, tf = docs[at] == rows, tf[at]
        else:
            tf, holds = index.packed.find(term_id, rows)
        scores += np.where(holds, coefficient * weights_of(tf, norms, index.k1), 0.0)
    return scores


__all__ = ["COMMON", "best_rows", "bm25_top"]
