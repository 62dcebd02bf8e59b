"""The k best rows from a few of them: a superset holding every row near the k-th best ranks as all rows
would once transformed, or says it cannot; the k-th best positive value of a mostly-zero array and
the rows at or above a bound below it."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ragsite.top import MARGIN, positive_tail, top_of_superset, top_rows


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(1, 400),
    k=st.integers(1, 12),
    levels=st.sampled_from([0, 2, 5]),
    bound=st.sampled_from([0.5, 3.0, 1e9]),
    extra=st.floats(0, 1),
    seed=st.integers(0, 2**31),
)
def test_a_superset_near_the_kth_ranks_as_every_row_transformed_would(size, k, levels, bound, extra, seed):
    """Ties in the raw values, and ties the transform makes (its clip at 1 when ``bound`` is small)."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, levels, size) / 3.0 if levels else rng.random(size) * 2
    raw[rng.random(size) < 0.3] = 0.0

    def fused(values):
        return np.clip(values / bound, 0.0, 1.0)

    kth = np.sort(raw)[-k] if size >= k else 0.0
    rows = np.flatnonzero((raw >= kth * (1 - MARGIN)) | (rng.random(size) < extra))
    found = top_of_superset(rows, raw[rows], k, fused)
    expected = top_rows(fused(raw), None, k)
    if size < k:
        assert found is None
    elif found is not None:  # None: the transform could tie a row left out; the caller ranks every row
        assert np.array_equal(found[0], expected) and np.array_equal(found[1], fused(raw)[expected])
    if bound == 1e9 and levels == 0 and kth > 0:
        assert found is not None  # distinct values, no clip: nothing can tie in


def test_a_clip_that_ties_the_kth_with_rows_left_out_gives_up():
    raw = np.asarray([5.0, 4.0, 3.0, 2.0])
    # Rows 0 and 1 given; all four clip to 1, so row 2 ties row 1 and would rank before row 3 only by row.
    assert top_of_superset(np.asarray([0, 1]), raw[:2], 2, lambda values: np.clip(values / 1.0, 0, 1)) is None


@settings(max_examples=200, deadline=None)
@given(size=st.integers(1, 60000), k=st.integers(1, 12), zeros=st.floats(0, 1), seed=st.integers(0, 2**31))
def test_the_kth_positive_value_is_the_kth_of_a_sort_and_the_tail_holds_all_above_the_bound(
    size, k, zeros, seed
):
    rng = np.random.default_rng(seed)
    values = rng.integers(0, 20, size) / 7.0
    values[rng.random(size) < zeros] = 0.0
    positive = np.sort(values[values > 0])
    kth, bound, near = positive_tail(values, k)
    assert kth == (positive[-k] if positive.size >= k else 0.0)
    if positive.size >= k:
        assert 0 < bound <= kth and np.array_equal(near, np.flatnonzero(values >= bound))


@settings(max_examples=200, deadline=None)
@given(size=st.integers(0, 300), k=st.integers(0, 12), levels=st.integers(1, 4), seed=st.integers(0, 2**31))
def test_tie_keys_order_equal_scores_as_a_full_sort_by_score_then_keys_would(size, k, levels, seed):
    """Memory's rule: the best positive scores, equal ones by kind, then id (then row)."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, levels + 1, size) / levels
    kind, ident = rng.integers(0, 3, size), rng.permutation(size)
    rows = np.arange(size)
    positive = rows[scores > 0]
    full = positive[np.lexsort((positive, ident[positive], kind[positive], -scores[positive]))][:k]
    assert np.array_equal(top_rows(scores, scores > 0, k, ties=(kind, ident)), full)


@settings(max_examples=300, deadline=None)
@given(
    size=st.integers(0, 5000),
    k=st.integers(0, 120),
    levels=st.sampled_from([1, 3, 0]),
    masked=st.booleans(),
    dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**31),
)
def test_the_best_rows_are_a_stable_full_sorts_first_k(size, k, levels, masked, dtype, seed):
    """Without tie keys: the first k of every eligible row sorted by score, best first, equal scores in
    row order (a search's candidates and its top), whether few or many rows tie at the k-th."""
    rng = np.random.default_rng(seed)
    drawn = rng.integers(0, levels + 1, size) / levels if levels else rng.standard_normal(size)
    scores = drawn.astype(dtype)
    eligible = rng.random(size) < 0.7 if masked else None
    rows = np.arange(size) if eligible is None else np.flatnonzero(eligible)
    full = rows[np.argsort(-scores[rows], kind="stable")][: max(k, 0)]
    assert np.array_equal(top_rows(scores, eligible, k), full)
