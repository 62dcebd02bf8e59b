"""Standard ranking metrics for the benchmarks and for ``measure``.

Definitions follow trec_eval as BEIR reports them through pytrec_eval (Thakur et al.,
"BEIR", 2021), so figures here compare with published ones:

* nDCG@k (Järvelin & Kekäläinen, "Cumulated gain-based evaluation of IR techniques", 2002)
  with linear gains and a ``log2(rank + 1)`` discount, the ideal ranking being the judged
  gains sorted in decreasing order;
* recall@k: the share of the relevant ids found in the first k;
* reciprocal rank: 1 / the rank of the first relevant id (Voorhees, TREC-8 QA track, 1999).

A question with nothing relevant scores 0 on each, as trec_eval reports it; leave such
questions out of an average rather than average their zeros in. A ranking that repeats an
id counts it at its first rank only (a repeat cannot be found twice). Pure: no Django.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Hashable, Mapping, Sequence
from itertools import islice
from typing import TypeVar

Id = TypeVar("Id", bound=Hashable)


def _first_k_distinct(ranked_ids: Sequence[Id], k: int | None) -> list[Id]:
    """The first ``k`` distinct ids of a ranking, in order (all of them when ``k`` is None)."""
    if k is not None and k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    distinct = dict.fromkeys(ranked_ids)
    return list(distinct) if k is None else list(islice(distinct, k))


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulated gain: ``sum over ranks i (from 1) of gain_i / log2(i + 1)``."""
    return sum(gain / math.log2(rank + 1) for rank, gain in enumerate(gains, start=1))


def ndcg_at_k(ranked_ids: Sequence[Id], relevance: Mapping[Id, float], k: int = 10) -> float:
    """nDCG@k: the DCG of the first ``k`` ranked ids over the DCG of the ideal first ``k``.

    ``relevance`` maps judged ids to their gains (1 for binary judgements, graded otherwise);
    an id not in it, or judged 0 or below, gains nothing. The ideal ranking is the positive
    gains in decreasing order, cut at ``k``. 0.0 when nothing is relevant.
    """
    top = _first_k_distinct(ranked_ids, k)
    ideal = dcg(sorted((gain for gain in relevance.values() if gain > 0), reverse=True)[:k])
    if ideal == 0:
        return 0.0
    return dcg([max(relevance.get(item, 0.0), 0.0) for item in top]) / ideal


def recall_at_k(ranked_ids: Sequence[Id], relevant_ids: Collection[Id], k: int) -> float:
    """Recall@k: ``|first k ∩ relevant| / |relevant|``; 0.0 when nothing is relevant."""
    if not relevant_ids:
        return 0.0
    relevant = set(relevant_ids)
    found = sum(1 for item in _first_k_distinct(ranked_ids, k) if item in relevant)
    return found / len(relevant)


def reciprocal_rank(ranked_ids: Sequence[Id], relevant_ids: Collection[Id], k: int | None = None) -> float:
    """1 / rank (from 1) of the first relevant id within the first ``k`` (all when None); else 0.0.

    Averaged over questions this is MRR (MRR@k with ``k``).
    """
    relevant = set(relevant_ids)
    for rank, item in enumerate(_first_k_distinct(ranked_ids, k), start=1):
        if item in relevant:
            return 1.0 / rank
    return 0.0


def character_error_rate(read: str, truth: str) -> float:
    """OCR's character error rate: the Levenshtein distance from ``read`` to ``truth`` (insertions,
    deletions and substitutions of one character each) over the length of ``truth`` (the measure OCR
    evaluations such as ISRI's ocreval report). Whitespace is compared as single spaces. 0 is perfect;
    it can exceed 1 when ``read`` is longer than ``truth``.

    One row of the distance table at a time, in numpy: with t[j] = min(above + 1, diagonal + cost), the
    row is min over k <= j of t[k] + (j - k), a running minimum of t[k] - k (Hyyrö's prefix-minimum form),
    so a page against a page (3,000 characters each) takes milliseconds rather than seconds."""
    import numpy as np

    read, truth = " ".join(read.split()), " ".join(truth.split())
    if not truth:
        return float(bool(read))
    target = np.frombuffer(truth.encode("utf-32-le"), dtype=np.uint32)
    steps = np.arange(len(truth) + 1)
    previous = steps.copy()
    for i, code in enumerate(np.frombuffer(read.encode("utf-32-le"), dtype=np.uint32), start=1):
        best = np.empty_like(previous)
        best[0] = i
        best[1:] = np.minimum(previous[1:] + 1, previous[:-1] + (target != code))
        previous = np.minimum.accumulate(best - steps) + steps
    return float(previous[-1]) / len(truth)
