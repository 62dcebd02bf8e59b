"""ragsite.fusion: every fused score stays in [0, 1], and each mode is the right one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from ragsite.fusion import (
    FUSION_WEIGHT,
    convex,
    entry_score,
    hybrid_scores,
    may_enter,
    normalise_bm25,
    normalise_bm25_by_max,
    normalise_cosine,
    reciprocal_rank,
)
from ragsite.lexical import BM25Index

cosines = arrays(np.float64, st.integers(0, 30), elements=st.floats(-1.0, 1.0000001))
weights = st.floats(0.0, 1.0)


def in_unit_interval(values: np.ndarray) -> bool:
    return bool(((values >= 0.0) & (values <= 1.0)).all())


def test_the_one_fusion_weight_is_the_measured_one():
    # Chosen on SciFact train and the dev set (docs/decisions/0053); a change is a new
    # measurement, and the floor and the OpenAI proportion move with it.
    assert FUSION_WEIGHT == 0.48


def test_negative_cosines_clip_to_zero_and_positive_ones_are_kept():
    np.testing.assert_array_equal(
        normalise_cosine(np.array([-0.4, 0.0, 0.3, 1.0000001])), [0.0, 0.0, 0.3, 1.0]
    )


def test_bm25_over_its_upper_bound_is_absolute_and_zero_without_a_bound():
    np.testing.assert_allclose(normalise_bm25(np.array([0.0, 1.0, 3.0]), 4.0), [0.0, 0.25, 0.75])
    np.testing.assert_array_equal(normalise_bm25(np.array([0.0, 0.0]), 0.0), [0.0, 0.0])


def test_bm25_by_max_puts_the_top_at_one():
    np.testing.assert_allclose(normalise_bm25_by_max(np.array([1.0, 4.0, 2.0])), [0.25, 1.0, 0.5])
    np.testing.assert_array_equal(normalise_bm25_by_max(np.zeros(3)), np.zeros(3))
    assert normalise_bm25_by_max(np.zeros(0)).shape == (0,)


def test_convex_endpoints_are_one_side_only():
    vector, lexical = np.array([0.2, 0.9]), np.array([0.7, 0.1])
    np.testing.assert_array_equal(convex(vector, lexical, 1.0), vector)
    np.testing.assert_array_equal(convex(vector, lexical, 0.0), lexical)
    np.testing.assert_allclose(
        convex(vector, lexical, 0.25), [0.25 * 0.2 + 0.75 * 0.7, 0.25 * 0.9 + 0.75 * 0.1]
    )


def test_convex_refuses_a_weight_outside_the_unit_interval_and_mismatched_shapes():
    with pytest.raises(ValueError):
        convex(np.zeros(2), np.zeros(2), 1.5)
    with pytest.raises(ValueError):
        convex(np.zeros(2), np.zeros(3), 0.5)


def test_mode_follows_which_scores_are_present():
    cosine, bm25 = np.array([0.5, -0.1]), np.array([2.0, 0.0])
    fused, mode = hybrid_scores(cosine, bm25, 4.0, weight=0.5)
    assert mode == "hybrid"
    np.testing.assert_allclose(fused, [0.5 * 0.5 + 0.5 * 0.5, 0.0])

    fused, mode = hybrid_scores(cosine, None, 4.0, weight=0.5)
    assert mode == "vector"
    np.testing.assert_allclose(fused, [0.5, 0.0])

    fused, mode = hybrid_scores(None, bm25, 4.0, weight=0.5)
    assert mode == "lexical"
    np.testing.assert_allclose(fused, [0.5, 0.0])

    with pytest.raises(ValueError):
        hybrid_scores(None, None, 0.0, weight=0.5)
    with pytest.raises(ValueError):
        hybrid_scores(cosine, None, 0.0, weight=-0.1)


def test_reciprocal_rank_fusion_on_a_hand_example():
    # k = 60. "a": 1/61 + 1/63; "b": 1/62 + 1/61; "c": 1/63; "d": 1/62.
    fused = reciprocal_rank([["a", "b", "c"], ["b", "d", "a"]])
    assert fused == pytest.approx({"a": 1 / 61 + 1 / 63, "b": 1 / 62 + 1 / 61, "c": 1 / 63, "d": 1 / 62})
    assert max(fused, key=fused.__getitem__) == "b"


def test_reciprocal_rank_counts_a_repeat_at_its_first_rank_and_honours_k():
    assert reciprocal_rank([[1, 1, 2]], k=0) == pytest.approx({1: 1.0, 2: 1 / 3})


@given(cosines)
def test_normalised_cosine_is_in_the_unit_interval(cosine):
    assert in_unit_interval(normalise_cosine(cosine))


@given(
    st.lists(st.lists(st.sampled_from("abcdef"), max_size=12), min_size=1, max_size=20),
    st.lists(st.sampled_from("abcdefz"), max_size=6),
    weights,
)
def test_fused_scores_from_a_real_index_are_in_the_unit_interval(documents, query, weight):
    index = BM25Index.from_terms(documents)
    bm25 = index.scores(query)
    bound = index.upper_bound(query)
    assert in_unit_interval(normalise_bm25(bm25, bound))
    assert in_unit_interval(normalise_bm25_by_max(bm25))
    cosine = np.linspace(-1.0, 1.0, num=len(documents))
    for given_cosine, given_bm25 in ((cosine, bm25), (cosine, None), (None, bm25)):
        fused, _ = hybrid_scores(given_cosine, given_bm25, bound, weight=weight)
        assert fused.shape == (len(documents),)
        assert in_unit_interval(fused)


@given(
    st.integers(0, 20).flatmap(lambda n: st.tuples(*(arrays(np.float64, n, elements=st.floats(0, 1)),) * 2)),
    weights,
)
def test_convex_of_unit_scores_stays_in_the_unit_interval(pair, weight):
    vector, lexical = pair
    fused = convex(vector, lexical, weight)
    assert in_unit_interval(fused)
    assert (fused >= np.minimum(vector, lexical) - 1e-12).all()
    assert (fused <= np.maximum(vector, lexical) + 1e-12).all()


def top_k(rows: np.ndarray, scores: np.ndarray, floor: float, k: int) -> list[tuple[int, float]]:
    """The k best (row, score) at or above the floor, ties to the lower row: the order search answers in."""
    keep = scores >= floor
    rows, scores = rows[keep], scores[keep]
    order = np.lexsort((rows, -scores))[:k]
    return [(int(rows[i]), float(scores[i])) for i in order]


@settings(max_examples=400)
@given(
    st.integers(0, 2**32 - 1),
    st.integers(1, 60),
    weights,
    st.sampled_from([0.0, 0.0, 0.2, 0.5, 0.9]),
    st.integers(1, 12),
    st.booleans(),
    st.sampled_from([0.0, 0.5, 7.0]),
)
def test_the_threshold_round_completes_any_candidate_set_to_the_exact_top_k(
    seed, n, weight, floor, k, lexical_too, upper
):
    """Issue 16 item 3, against brute force: a random candidate set, enlarged by ``may_enter``, holds the
    true top k; and when one row bounding all those left out cannot enter, none of them can."""
    rng = np.random.default_rng(seed)
    # Few distinct values, so scores tie often (the 1M bench repeats each text ~193 times).
    cosine = rng.choice(np.asarray([-0.2, 0.0, 0.1, 0.35, 0.6, 0.6, 0.9, 1.0]), n)
    bm25 = rng.choice(np.asarray([0.0, 0.5, 1.5, 1.5, 3.0, 7.0]), n) if lexical_too else None
    # Each row's bound is its own cosine or above (a pooled cosine is at most its best window's).
    bound = cosine + rng.choice(np.asarray([0.0, 0.0, 0.05, 0.3]), n)
    fused, _ = hybrid_scores(cosine, bm25, upper, weight=weight)
    scored = np.flatnonzero(rng.random(n) < rng.random())
    outside = np.setdiff1d(np.arange(n), scored)
    lexical = None if bm25 is None else bm25[outside]
    threshold = entry_score(fused[scored], floor, k)
    reach, whole = may_enter(threshold, bound[outside], lexical, upper, weight=weight)
    assert whole and np.array_equal(reach, np.unique(reach))
    enlarged = np.union1d(scored, outside[reach])
    assert top_k(enlarged, fused[enlarged], floor, k) == top_k(np.arange(n), fused, floor, k)
    if outside.size:
        # The fast path: the best bound and the best BM25 left out, as one row.
        worst, _ = may_enter(
            threshold,
            bound[outside].max(keepdims=True),
            None if lexical is None else lexical.max(keepdims=True),
            upper,
            weight=weight,
        )
        assert worst.size or reach.size == 0


def test_entry_score_is_the_kth_best_at_or_above_the_floor_else_the_floor():
    scores = np.asarray([0.9, 0.2, 0.7, 0.7, 0.4])
    assert entry_score(scores, 0.0, 3) == 0.7
    assert entry_score(scores, 0.3, 4) == 0.4
    assert entry_score(scores, 0.5, 4) == 0.5  # three at or above the floor: any row reaching it may enter
    assert entry_score(np.zeros(0), 0.25, 1) == 0.25
    with pytest.raises(ValueError):
        entry_score(scores, 0.0, 0)


def test_a_bound_below_the_entry_score_adds_nothing_and_a_tie_is_added():
    # fused(0.7, 1.0 / 2) at weight 0.5 is 0.6: below 0.8, so neither row left out can enter.
    reach, whole = may_enter(0.8, np.asarray([0.5, 0.7]), np.asarray([1.0, 0.0]), 2.0, weight=0.5)
    assert reach.size == 0 and whole
    # fused(0.6, 0.8) is 0.7, the entry score itself: a tie may go to the lower row, so it is added.
    reach, _ = may_enter(0.7, np.asarray([0.6, 0.2]), np.asarray([0.8, 0.8]), 1.0, weight=0.5)
    assert reach.tolist() == [0]


def test_past_the_cap_the_rows_with_the_best_bounds_are_kept_and_the_set_is_not_whole():
    bound = np.asarray([0.5, 0.9, 0.7, 0.9, 0.6])
    reach, whole = may_enter(0.1, bound, None, 0.0, weight=1.0, cap=3)
    assert not whole and reach.tolist() == [1, 2, 3]
    reach, whole = may_enter(0.1, bound, None, 0.0, weight=1.0, cap=5)
    assert whole and reach.tolist() == [0, 1, 2, 3, 4]
