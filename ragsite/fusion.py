"""Fusing the vector and lexical scores of paragraphs into one score in [0, 1].

Each scale is first mapped onto [0, 1] and only then weighted (a convex combination);
BM25 and cosine are never added raw, because BM25 is unbounded and grows with the length
of the question, so a raw sum would let the question's wording pick the winner. The
method and its figures are DESIGN.md §5: on SciFact (test, whole abstracts, seed 004's
BM25 without stemming, all-MiniLM-L6-v2) lexical alone gave nDCG@10 0.662, vector alone
0.645, reciprocal rank fusion 0.690, and a convex sum of cosine and BM25 divided by its
per-question upper bound 0.723 at weight 0.5 (weight chosen on the train split).

The shape follows txtai's hybrid scoring (``embeddings/search/hybrid.py`` and
``scoring/normalize.py``): normalise each, then ``weight * vector + (1 - weight) * lexical``.
Pure: no Django models, no settings.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

import numpy as np

# The share of the vector score in the fused one for collection search (memory recall has its own,
# memory_app.conf): one weight that serves both SciFact's train split and the known-answers dev set,
# measured with every window of a long paragraph pooled as a build pools them (docs/decisions/0053).
# The functions below take the weight as an argument and callers pass this, so no call fuses with a
# weight it did not name.
FUSION_WEIGHT = 0.48

# Cormack, Clarke & Büttcher (2009) fix k = 60 for every run they report.
RRF_K = 60

HYBRID = "hybrid"
VECTOR = "vector"
LEXICAL = "lexical"

Id = TypeVar("Id", bound=Hashable)


def normalise_cosine(cosine: np.ndarray) -> np.ndarray:
    """Cosine similarity onto [0, 1] by clipping: ``min(max(cos, 0), 1)``.

    Over L2-normalised sentence-embedding vectors a negative cosine carries no relevance.
    Such models are trained contrastively to pull related texts together and push unrelated
    ones apart, and in practice unrelated texts land near 0 rather than at -1 (seed 000:
    "cosine over normalised vectors is almost always positive"), so a value below 0 says
    "even less related than unrelated", which is noise. Clipping keeps the cosine's own
    absolute scale, which a floor (DESIGN.md §5) is set against.

    Alternatives considered: ``(cos + 1) / 2`` keeps every value but squeezes the useful
    band (about 0.1–0.8 for MiniLM) into half the range and gives every unrelated paragraph
    a score near 0.5 that the lexical half cannot pull down; min–max over the candidates
    (txtai's default) makes the scale relative, so the best paragraph of an unanswerable
    question would score 1. The upper clip only absorbs float32 rounding above 1.
    """
    return np.asarray(cosine, dtype=np.float64).clip(0.0, 1.0)  # np.clip's own method, one layer less


def normalise_bm25(scores: np.ndarray, upper_bound: float) -> np.ndarray:
    """BM25 divided by the question's upper bound, ``sum idf(q) * (k1 + 1)``; 0 when that is 0.

    ``tf (k1 + 1) / (tf + K) < k1 + 1`` for every term (the tf saturation of Robertson &
    Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond", 2009), so a
    score divided by the sum of its terms' ceilings lies in [0, 1) on an absolute scale: a
    paragraph at 0.6 matched most of the question's weight whatever the top paragraph did,
    which is what lets a floor mean the same thing from one question to the next. See
    ``BM25Index.upper_bound``. An upper bound of 0 means no question term is in the index,
    so every score is 0 too. The clip only absorbs rounding.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if upper_bound <= 0:
        return np.zeros_like(scores)
    return np.clip(scores / upper_bound, 0.0, 1.0)


def normalise_bm25_by_max(scores: np.ndarray) -> np.ndarray:
    """BM25 divided by the best score among the candidates (max normalisation); 0 if all are 0.

    The relative alternative measured in DESIGN.md §5 (0.719 at weight 0.7 on SciFact,
    against 0.723 for :func:`normalise_bm25`): the top paragraph always scores 1, however
    weakly it matched, so it ranks well but gives a floor nothing absolute to stand on.
    """
    scores = np.asarray(scores, dtype=np.float64)
    top = float(scores.max()) if scores.size else 0.0
    if top <= 0:
        return np.zeros_like(scores)
    return scores / top


def convex(vector01: np.ndarray, lexical01: np.ndarray, weight: float) -> np.ndarray:
    """Convex combination ``weight * vector + (1 - weight) * lexical`` of two [0, 1] scores.

    The linear fusion of normalised scores (Fox & Shaw's CombSUM with weights; Bruch, Gai &
    Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", 2023, who find it beats
    RRF once the weight is tuned). With both inputs in [0, 1] and ``0 <= weight <= 1`` the
    result is in [0, 1]; weight 1 is vector only and weight 0 lexical only.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be within [0, 1], got {weight}")
    vector01 = np.asarray(vector01, dtype=np.float64)
    lexical01 = np.asarray(lexical01, dtype=np.float64)
    if vector01.shape != lexical01.shape:
        raise ValueError(f"score arrays differ in shape: {vector01.shape} and {lexical01.shape}")
    # The clip only absorbs rounding (w*1 + (1-w)*1 can land a hair above 1).
    return np.clip(weight * vector01 + (1.0 - weight) * lexical01, 0.0, 1.0)


def clears_floor(scores: np.ndarray | float, floor: float) -> np.ndarray:
    """The floor rule, written once: a score clears the floor at or above it (DESIGN.md §5). Every path
    that applies a floor asks here (search's exact, approximate and reranked paths, explain, the IVF
    bound, measure's report), so changing the rule changes all of them together."""
    return np.asarray(scores) >= floor


def floor_is_open(floor: float) -> bool:
    """Whether ``floor`` lets every fused score through: the least one, 0, clears it (fused scores lie in
    [0, 1] and the rule is monotone), so a caller may skip building a mask."""
    return bool(clears_floor(0.0, floor))


def entry_score(scores: np.ndarray, floor: float, k: int) -> float:
    """The least fused score with which a row not among ``scores`` could still enter their top ``k``
    at or above ``floor``: the k-th best of those at or above the floor, else the floor itself.

    A row scoring exactly this may still enter (a tie goes to the lower row), so callers ask ``>=`` (a
    bound on entry, not the floor: with the floor as ``S`` the rows it lets through are a superset).
    """
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    scores = np.asarray(scores, dtype=np.float64)
    eligible = scores[clears_floor(scores, floor)]
    if eligible.size < k:
        return float(floor)
    return float(np.partition(eligible, eligible.size - k)[eligible.size - k])


def may_enter(
    threshold: float,
    cosine_bound: np.ndarray,
    lexical: np.ndarray | None,
    upper_bound: float,
    *,
    weight: float,
    cap: int | None = None,
) -> tuple[np.ndarray, bool]:
    """Which rows left out of a scored set could still enter its top k: Fagin's threshold algorithm, one
    round.

    ``threshold`` is the scored rows' :func:`entry_score` ``S``; ``cosine_bound`` holds, for each row
    left out, a cosine at or above its own, and ``lexical`` its exact BM25 (None: vector only, as in
    :func:`hybrid_scores`). Returns the positions (ascending) of the rows whose fused score could reach
    ``S``, and whether that is all of them (False when more than ``cap`` could: then the ``cap`` with
    the best bounds, and the top k stays approximate). Given one row bounding every row left out (the
    best cosine ``c_out`` and the best BM25 ``l_out`` among them), an empty answer says the scored rows
    already hold the top k.

    Why one round suffices: the true top k's k-th score at or above the floor is at least the scored
    rows' (they are some of the rows), so each row of the true top k scores ``S`` or more. Fusion never
    decreases in either arm, so a row left out fuses at most ``fused(its cosine bound, its BM25)``, and
    every row whose bound reaches ``S`` is returned. Once those are scored, a row still left out fuses
    below ``S``, which is at most the enlarged set's k-th score (or the floor), so it can neither enter
    nor tie. Fagin's per-arm form adds every row with BM25 above ``l_need``, what it needs beside
    ``c_out`` to reach ``S``, or cosine above ``c_need``, beside ``l_out`` (a row left out then fuses at
    most ``fused(c_need, l_need) <= S``); a row whose own bound reaches ``S`` is in both of those sets,
    so the per-row form adds fewer rows for the same guarantee.
    """
    bound, _ = hybrid_scores(np.asarray(cosine_bound, dtype=np.float64), lexical, upper_bound, weight=weight)
    reach = (bound >= threshold).ravel().nonzero()[0]  # np.flatnonzero's own steps
    if cap is None or reach.size <= cap:
        return reach, True
    return np.sort(reach[np.lexsort((reach, -bound[reach]))[:cap]]), False


def reciprocal_rank(rank_lists: Iterable[Sequence[Id]], k: int = RRF_K) -> dict[Id, float]:
    """Reciprocal rank fusion: ``score(d) = sum over lists of 1 / (k + rank(d))``, rank from 1.

    Cormack, Clarke & Büttcher, "Reciprocal Rank Fusion outperforms Condorcet and individual
    Rank Learning Methods", SIGIR 2009. Each list is a ranking, best first; an id absent from
    a list adds nothing for it, and an id repeated within one list counts at its first rank.
    Returned for comparison in benchmarks: the scores depend only on ranks, so they carry no
    absolute meaning and a floor cannot be set against them.
    """
    if k < 0:
        raise ValueError(f"k must not be negative, got {k}")
    fused: dict[Id, float] = {}
    for ranking in rank_lists:
        seen: set[Id] = set()
        for rank, item in enumerate(ranking, start=1):
            if item in seen:
                continue
            seen.add(item)
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return fused


def hybrid_scores(
    cosine: np.ndarray | None, bm25: np.ndarray | None, upper_bound: float, *, weight: float
) -> tuple[np.ndarray, str]:
    """One [0, 1] score per paragraph, and the mode that produced it.

    * both given: ``convex(normalise_cosine(cosine), normalise_bm25(bm25, upper_bound), weight)``,
      mode ``"hybrid"``;
    * cosine only (no lexical statistics): ``normalise_cosine(cosine)``, mode ``"vector"``;
    * BM25 only (a collection without vectors, where the question is not embedded):
      ``normalise_bm25(bm25, upper_bound)``, mode ``"lexical"``.

    The weight is validated in every mode, so a misconfigured one fails on the first search
    rather than on the first collection that happens to have vectors.
    """
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"weight must be within [0, 1], got {weight}")
    if cosine is not None and bm25 is not None:
        return convex(normalise_cosine(cosine), normalise_bm25(bm25, upper_bound), weight), HYBRID
    if cosine is not None:
        return normalise_cosine(cosine), VECTOR
    if bm25 is not None:
        return normalise_bm25(bm25, upper_bound), LEXICAL
    raise ValueError("hybrid_scores needs cosine scores, BM25 scores, or both")
