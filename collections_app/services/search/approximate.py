"""The approximate (IVF) path: the rows a search scores exactly, chosen so that its top k is the exact
path's, and the per-process IVF lists they are probed from.

Above IVF_MIN_PARAGRAPHS a search scores a candidate set rather than every row: the vector top-K of
the probed lists and the exact lexical top-K (docs/decisions/0008). A fixed depth misses rows of the exact
hybrid top k where more rows nearly tie on one arm than it holds (the 1M bench repeats each text
~193 times with near-equal BM25: hybrid recall@10 against the exact path was 0.399), so one round of
the threshold algorithm then adds every row that a bound cannot rule out (`ragsite.fusion.may_enter`).
"""

import logging
import threading
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ragsite.fusion import hybrid_scores, may_enter
from ragsite.top import top_rows

from ...conf import settings
from ...index.ivf import IVFLists, build_lists
from ...index.mapped import MappedIndex
from ...index.vector_codec import HalfQuery, half_query
from ...models import Collection, CollectionBuilt
from ...ranking import Entries, Lexical, Ranking, entry_scores, fused, top_at_floor
from .plan import SearchPlan

logger = logging.getLogger("ragsite.search")

# How many candidates each arm brings to an approximate (IVF) search: the vector top-K from the
# probed lists and the exact lexical top-K, each then scored exactly on both arms before fusion.
CANDIDATE_DEPTH = 100
# At most this many times CANDIDATE_DEPTH rows more are scored when the bound cannot rule them out
# (`scored_candidates`): past it a question whose top is a sea of near-ties stays approximate rather
# than turning into a scan of the probed lists.
EXTENSION_CAP = 50
# Rows whose BM25 is within this share of the K-th best lexical candidate's are candidates too: at 1M
# the bench's 193 copies of an abstract lie within 2 % of one another (docs/decisions/0008).
LEXICAL_TIE = 0.02
# Added to a probed window's cosine before it bounds its row's: the probe's product and
# `cosine_of_rows`' are separate float32 products that can differ in the last bits (so can
# `lean_to_first`'s rounding), and a bound an ulp short would miss a row that ties.
COSINE_ROUNDING = 1e-5


class Probe(NamedTuple):
    """What a probe of the IVF lists saw, for bounding the rows the candidates leave out."""

    members: np.ndarray  # the probed windows of readable rows (positions in the index's vectors), list order
    closeness: np.ndarray  # each one's cosine with the question
    cosine_out: float  # no readable row left out has a probed window above this (0 when none is left)
    lexical_out: float  # no readable row left out has a BM25 above this
    # The vector candidates (rows ascending) and their cosines, as the probe took them, when each row is
    # one float16 vector: scoring the candidates reads these instead of the vectors again.
    near: tuple[np.ndarray, np.ndarray] | None = None


def uses_ivf(index: MappedIndex) -> bool:
    """Whether a search of ``index`` takes the approximate path: IVF_MIN_PARAGRAPHS rows or more."""
    threshold = int(settings.IVF_MIN_PARAGRAPHS)
    return threshold > 0 and index.size >= threshold


def approximate_ranking(
    plan: SearchPlan, vector: np.ndarray, lexical: Lexical | None, *, weight: float
) -> Ranking:
    """The approximate path's ranking: the candidates scored exactly, then the one floor and top k."""
    index, view = plan.index, plan.view
    # A row's best entry is scored exactly over every entry (they are few beside the rows): its rows join
    # the candidates, so the top k stays the exact path's (`scored_candidates`).
    entries = entry_scores(index, plan.question_terms, vector, weight=weight, view=view)
    # The question prepared once for every float16 product this search takes (probe, candidates, more).
    question = half_query(vector) if index.vector_at is not None else vector

    def score(rows: np.ndarray, known: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[np.ndarray, str]:
        cosine = index.row_cosines(question, rows, view, known)
        return fused(
            index, vector, lexical, weight=weight, view=view, rows=rows, entries=entries, cosine=cosine
        )

    lists = ivf_of(plan.collection, plan.built, plan.index_key, index)
    candidates, scores, mode, top = scored_candidates(
        plan.collection.name,
        lists,
        index,
        question,
        bm25=None if lexical is None else lexical.scores,
        upper=None if lexical is None else lexical.upper,
        mask=plan.mask,
        nprobe=plan.nprobe,
        floor=plan.floor,
        most=plan.most,
        score=score,
        weight=weight,
        entries=entries,
    )
    return Ranking(top=top, rows=candidates, scores=scores, mode=mode, lexical=lexical, entries=entries)


def scored_candidates(
    name: str,
    lists: IVFLists,
    index: MappedIndex,
    vector: np.ndarray | HalfQuery,
    *,
    bm25: np.ndarray | None,
    upper: float | None,
    mask: np.ndarray,
    nprobe: int | None,
    floor: float,
    most: int,
    score: Callable[..., tuple[np.ndarray, str]],
    weight: float,
    entries: Entries | None = None,
) -> tuple[np.ndarray, np.ndarray, str, np.ndarray]:
    """The rows an approximate search scores (readable, ascending), their exact fused scores from
    `score` (given the rows, and the probe's cosines of the vector candidates, `Probe.near`), the
    mode, and the top `most` of those rows at or above `floor` (`ranking.top_at_floor`). ``vector``
    may come prepared (`vector_codec.half_query`).

    The candidates first (`candidates`), then one round of the threshold algorithm (`fusion.may_enter`)
    against `S`, the `most`-th candidate's score at or above the floor (or the floor). First one row
    that bounds all those left out, from the probe's own numbers: when even it cannot reach `S`, the
    candidates hold the top `most` and nothing more is read (the common case, as cheap as before).
    Otherwise every probed row left out, and every row without a vector (its cosine is 0), is bounded
    by its best window's cosine and its exact BM25, and those whose bound reaches `S` are scored too.
    So the answer is the exact path's whenever the exact top `most` lies in the probed lists. Rows
    outside them are never added (the IVF's approximation, measured by its own recall), nor more than
    EXTENSION_CAP x CANDIDATE_DEPTH rows: past that those with the best bounds are, and the answer
    stays approximate.

    With ``entries`` (each row's best entry, scored exactly over every entry), the CANDIDATE_DEPTH rows
    whose best entries score highest are candidates too, and after the first scoring every readable row
    with entries left out whose bound reaches `S` (`_lifted_out`).
    """
    found, probe = candidates(name, lists, index, vector, bm25, mask, nprobe)
    if entries is not None:
        found = np.union1d(found, top_rows(entries.best, mask & np.isfinite(entries.best), CANDIDATE_DEPTH))
    scores, mode = score(found, probe.near)
    top, threshold = _top_and_entry(found, scores, floor, most)
    if entries is not None:
        more = _lifted_out(entries, mask, found, probe, bm25, upper, weight, threshold)
        if more.size:
            rows = np.concatenate([found, more])
            order = np.argsort(rows, kind="stable")
            found, scores = rows[order], np.concatenate([scores, score(more)[0]])[order]
            top, threshold = _top_and_entry(found, scores, floor, most)
    cosine_out = np.asarray([probe.cosine_out + COSINE_ROUNDING])
    lexical_out = None if bm25 is None else np.asarray([probe.lexical_out])
    if may_enter(threshold, cosine_out, lexical_out, upper or 0.0, weight=weight)[0].size == 0:
        return found, scores, mode, top
    known, bound = _left_out(index, mask, probe, found)
    cap = EXTENSION_CAP * CANDIDATE_DEPTH
    reach, whole = may_enter(
        threshold, bound, None if bm25 is None else bm25[known], upper or 0.0, weight=weight, cap=cap
    )
    if not whole:
        logger.debug(
            "search %s: more than %d rows could enter the top %d; the top stays approximate", name, cap, most
        )
    more = known[reach]
    logger.debug(
        "search %s: the candidates' bound did not hold, %d more rows scored exactly", name, more.size
    )
    if more.size == 0:
        return found, scores, mode, top
    rows = np.concatenate([found, more])
    order = np.argsort(rows, kind="stable")  # ascending again: top_rows breaks ties to the lower row
    found, scores = rows[order], np.concatenate([scores, score(more)[0]])[order]
    return found, scores, mode, _top_and_entry(found, scores, floor, most)[0]


def _top_and_entry(rows: np.ndarray, scores: np.ndarray, floor: float, most: int) -> tuple[np.ndarray, float]:
    """The top ``most`` of ``rows`` (readable, ascending, so ties go to the lower row as on the exact path)
    at or above ``floor`` (`ranking.top_at_floor`), and `fusion.entry_score` of their scores, read off
    that top: the ``most``-th best score at or above the floor is its last one's (else the floor)."""
    top = top_at_floor(scores, floor, most, rows=rows)
    if top.size < most:
        return top, float(floor)
    return top, float(scores[rows.searchsorted(top[-1])])


def candidates(
    name: str,
    lists: IVFLists,
    index: MappedIndex,
    vector: np.ndarray | HalfQuery,
    bm25: np.ndarray | None,
    mask: np.ndarray,
    nprobe: int | None,
) -> tuple[np.ndarray, Probe]:
    """Rows to score exactly: the IVF's vector top-K (from the nearest lists) ∪ the exact lexical top-K,
    readable ones only, ascending; and what the probe saw.

    The lists scored: the request's `nprobe`, else IVF_NPROBE when set, else the build's measured one.
    """
    if nprobe is None:
        nprobe = int(settings.IVF_NPROBE) or lists.nprobe
    nprobe = max(1, min(int(nprobe), lists.nlist))
    members, closeness = lists.scan(vector, nprobe, index.products)
    vector_row = np.asarray(index.vector_row)
    one_each = index.window_starts is None and vector_row.size == index.size
    # One vector a row, every row with one: vector i is row i.
    owners = members if one_each else vector_row[members]
    if mask is not index.every_row and not mask.all():
        # Filtered inside the kernel: a window of a row this search may not use never takes a
        # candidate's place (a reader who may read 1 % of the rows still gets K readable candidates).
        keep = mask[owners]
        members, closeness, owners = members[keep], closeness[keep], owners[keep]
    # Windows of one paragraph can take several places: ask for more vectors than rows wanted (one vector
    # a row: the K best vectors are the K best rows, the first K of the 2K in the same order).
    order = top_rows(closeness, None, CANDIDATE_DEPTH if one_each else CANDIDATE_DEPTH * 2)
    # A readable row left out has every window after the window that brought in the K-th row; with
    # fewer rows than K, after the windows looked at (and when those are all, none is left out).
    cosine_out = float(closeness[order[-1]]) if members.size > order.size else 0.0
    rows = owners[order]
    if one_each:
        first = order  # each vector its own row: the rows are distinct, in the order found
        near = rows
    else:
        _, first = np.unique(rows, return_index=True)
        first = np.sort(first)[:CANDIDATE_DEPTH]
        near, first = rows[first], order[first]
    if near.size == CANDIDATE_DEPTH:
        cosine_out = float(closeness[first[-1]])
    known = None
    if one_each and index.vector_at is not None:
        # A row's cosine is its one vector's product, which the probe took; float16 products are the same
        # bits however they are taken (vector_codec.half_products), float32 ones through BLAS need not be.
        ascending = near.argsort(kind="stable")
        known = near[ascending], closeness[first][ascending]
    lexical_out = 0.0
    if bm25 is not None:
        readable = mask & (bm25 > 0)
        lexical = top_rows(bm25, readable, CANDIDATE_DEPTH)
        near = np.concatenate([near, lexical])
        # Below the K-th best BM25; with fewer than K above 0, every row above 0 is in.
        lexical_out = float(bm25[lexical[-1]]) if lexical.size == CANDIDATE_DEPTH else 0.0
        if lexical_out > 0:
            near = np.concatenate([near, _tied(bm25, readable, lexical_out)])
    found = known[0] if known is not None and bm25 is None else np.unique(near)  # ascending, distinct
    logger.debug(
        "search %s: IVF cosine, nprobe %d of %d lists, %d candidates of %d rows scored exactly",
        name,
        nprobe,
        lists.nlist,
        found.size,
        index.size,
    )
    return found, Probe(members, closeness, max(cosine_out, 0.0), lexical_out, known)


def _tied(bm25: np.ndarray, readable: np.ndarray, kth: float) -> np.ndarray:
    """Readable rows within LEXICAL_TIE of the K-th best BM25 (the best EXTENSION_CAP x CANDIDATE_DEPTH
    of them): near-ties that a fixed depth splits by BM25's last digits, while the exact hybrid orders
    them by their cosines, which the probe may not have read."""
    tied = np.flatnonzero(readable & (bm25 >= kth * (1 - LEXICAL_TIE)))
    cap = EXTENSION_CAP * CANDIDATE_DEPTH
    return tied if tied.size <= cap else tied[top_rows(bm25[tied], None, cap)]


def _left_out(
    index: MappedIndex, mask: np.ndarray, probe: Probe, found: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The readable rows the candidates `found` left out that a bound can speak for, and each one's
    cosine bound: a probed row's best window's (a row's pooled cosine is at most that, `lean_to_first`),
    plus COSINE_ROUNDING, and 0 for a row without a vector."""
    # In ascending order a row's windows are consecutive vectors, so each row's windows are a run
    # (the probe gives them in list order, and one row's windows may lie in several lists).
    ascending = np.argsort(probe.members, kind="stable")
    owners = np.asarray(index.vector_row)[probe.members[ascending]]
    closeness = probe.closeness[ascending]
    starts = np.flatnonzero(np.diff(owners, prepend=-1))
    probed = owners[starts].astype(np.int64)
    best = np.maximum.reduceat(closeness, starts) if starts.size else np.zeros(0, np.float32)
    bare = _vectorless(index, mask)
    known = np.concatenate([probed, bare])
    bound = np.concatenate([best.astype(np.float64) + COSINE_ROUNDING, np.zeros(bare.size)])
    keep = mask[known] & ~_within(known, found)
    return known[keep], bound[keep]


def _lifted_out(
    entries: Entries,
    mask: np.ndarray,
    found: np.ndarray,
    probe: Probe,
    bm25: np.ndarray | None,
    upper: float | None,
    weight: float,
    threshold: float,
) -> np.ndarray:
    """Readable rows with entries that `found` left out and whose bound reaches ``threshold``: each leg
    lifted by the row's best entry's as far as `ranking.lifted` can (share 1), the row's own cosine
    bounded as a probed row's is (`Probe.cosine_out`), its BM25 exact."""
    rows = np.flatnonzero(mask & np.isfinite(entries.best))
    rows = rows[~_within(rows, found)]
    if rows.size == 0:
        return rows
    cosine = np.full(rows.size, probe.cosine_out + COSINE_ROUNDING, dtype=np.float64)
    if entries.cosine is not None:
        cosine = np.maximum(cosine, entries.cosine[rows] + COSINE_ROUNDING)
    lexical = None
    if bm25 is not None:
        lexical = np.asarray(bm25[rows], dtype=np.float64)
        if entries.lexical is not None and upper:
            lexical = np.maximum(lexical, entries.lexical[rows] * upper)
    bound, _mode = hybrid_scores(cosine, lexical, upper or 0.0, weight=weight)
    return rows[bound >= threshold]


def _vectorless(index: MappedIndex, mask: np.ndarray) -> np.ndarray:
    """Readable rows without a vector (ascending); no scan when every row has one."""
    with_vectors = index.vectors.shape[0] if index.window_starts is None else index.window_starts.size
    if with_vectors >= index.size:
        return np.zeros(0, dtype=np.int64)
    return np.flatnonzero(mask & ~index.has_vector)


def _within(rows: np.ndarray, sorted_rows: np.ndarray) -> np.ndarray:
    """Whether each of `rows` is one of `sorted_rows` (ascending)."""
    if sorted_rows.size == 0:
        return np.zeros(rows.size, dtype=bool)
    at = np.minimum(np.searchsorted(sorted_rows, rows), sorted_rows.size - 1)
    return sorted_rows[at] == rows


# --- The IVF lists, once per build and process ------------------------------------------------

_ivf_cache: dict[int, tuple[str, IVFLists]] = {}
_ivf_lock = threading.Lock()


def forget_ivf(collection_id: int) -> None:
    """Drop this process's IVF lists of a collection; the next approximate search builds or maps them."""
    _ivf_cache.pop(collection_id, None)


def ivf_of(collection: Collection, built: CollectionBuilt, key: str, index: MappedIndex) -> IVFLists:
    """The IVF lists over the build's vectors (a paragraph's windows are rows of their own), once per
    build and process: k-means++ seeded from the build's interchange index_id, and the nprobe that
    reached IVF_RECALL on its own rows (ivf.build_lists)."""
    stored = index.ivf
    if (
        stored is not None
        and stored.index_id == built.ivf_index_id
        and stored.target_recall == float(settings.IVF_RECALL)
    ):
        _ivf_cache.pop(collection.pk, None)  # an earlier build's lists, built here, are done with
        return stored  # written with the build: mapped, shared, nothing to build here
    cached = _ivf_cache.get(collection.pk)
    if cached is not None and cached[0] == key:
        return cached[1]
    with _ivf_lock:
        cached = _ivf_cache.get(collection.pk)
        if cached is None or cached[0] != key:
            lists = build_lists(
                index.vector_matrix(), index_id=built.ivf_index_id, target_recall=float(settings.IVF_RECALL)
            )
            logger.debug(
                "search %s: built IVF, %d lists over %d vectors, nprobe %d for recall@10 %.3f",
                collection.name,
                lists.nlist,
                index.vectors.shape[0],
                lists.nprobe,
                lists.recall,
            )
            cached = _ivf_cache[collection.pk] = (key, lists)
    return cached[1]


__all__ = [
    "CANDIDATE_DEPTH",
    "COSINE_ROUNDING",
    "EXTENSION_CAP",
    "LEXICAL_TIE",
    "Probe",
    "approximate_ranking",
    "candidates",
    "forget_ivf",
    "ivf_of",
    "scored_candidates",
    "uses_ivf",
]
