"""How a long paragraph's window cosines make its one cosine (windows.lean_to_first, pool_windows)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collections_app.text import windows
from collections_app.text.windows import LATER_WINDOW_SHARE, lean_to_first, pool_windows


def test_the_first_window_counts_whole_and_a_later_one_only_by_its_share_of_what_it_adds():
    # Paragraphs: one window (0.4); first 0.2 then a better 0.6; first 0.5 then worse ones.
    per_vector = np.asarray([0.4, 0.2, 0.6, 0.5, 0.1, 0.3], dtype=np.float32)
    starts = np.asarray([0, 1, 3])
    pooled = pool_windows(per_vector, starts)
    assert pooled.dtype == np.float32
    assert pooled[0] == np.float32(0.4)  # one window: its cosine, whatever the share
    assert pooled[1] == pytest.approx(0.2 + LATER_WINDOW_SHARE * 0.4, abs=1e-6)
    assert pooled[2] == np.float32(0.5)  # a later window below the first takes nothing away


def test_share_one_is_the_best_window_exactly_and_share_zero_the_first():
    per_vector = np.asarray([0.1234567, 0.7654321, 0.3, 0.31], dtype=np.float32)
    starts = np.asarray([0, 2])
    assert np.array_equal(
        pool_windows(per_vector, starts, share=1.0), np.maximum.reduceat(per_vector, starts)
    )
    assert np.array_equal(pool_windows(per_vector, starts, share=0.0), per_vector[starts])


def test_the_module_share_is_the_default(monkeypatch):
    monkeypatch.setattr(windows, "LATER_WINDOW_SHARE", 0.5)
    assert pool_windows(np.asarray([0.2, 0.6], np.float32), np.asarray([0]))[0] == pytest.approx(0.4)


@settings(max_examples=200, deadline=None)
@given(
    counts=st.lists(st.integers(1, 5), min_size=1, max_size=12),
    share=st.floats(0, 1),
    seed=st.integers(0, 2**31),
)
def test_a_pooled_cosine_lies_between_the_first_window_and_the_best(counts, share, seed):
    per_vector = np.random.default_rng(seed).uniform(-1, 1, sum(counts)).astype(np.float32)
    starts = np.cumsum([0, *counts[:-1]])
    pooled = pool_windows(per_vector, starts, share=share)
    first, best = per_vector[starts], np.maximum.reduceat(per_vector, starts)
    assert np.all(pooled >= first - 1e-6) and np.all(pooled <= best + 1e-6)
    # More share never lowers a paragraph: the rule is monotone in it.
    assert np.all(pool_windows(per_vector, starts, share=min(1.0, share + 0.1)) >= pooled - 1e-6)


@pytest.mark.parametrize("share", [-0.1, 1.5, float("nan")])
def test_a_share_outside_zero_to_one_is_refused(share):
    with pytest.raises(ValueError, match="share"):
        lean_to_first(np.zeros(1, np.float32), np.zeros(1, np.float32), share)


def test_no_paragraphs_pool_to_nothing():
    assert pool_windows(np.zeros(0, np.float32), np.zeros(0, np.int64)).shape == (0,)


@pytest.mark.parametrize("share", [0.0, 0.5, 0.75, 1.0])
def test_the_offline_sweep_pools_as_the_product_does(share):
    """bench/beir/beir_sweep.py's `first+A` is this rule bit for bit, so its figures are the product's."""
    from bench.beir.beir_sweep import pooled

    rng = np.random.default_rng(7)
    counts = rng.integers(1, 5, 50)
    per_vector = rng.uniform(-0.2, 0.9, counts.sum()).astype(np.float32)
    starts = np.cumsum(np.concatenate([[0], counts[:-1]]))
    rest = np.full(counts.size, -np.inf, dtype=np.float32)
    for i, (start, count) in enumerate(zip(starts, counts, strict=True)):
        if count > 1:
            rest[i] = per_vector[start + 1 : start + count].max()
    mean = (np.add.reduceat(per_vector, starts) / counts).astype(np.float32)
    # Share 1 is the best window, which the sweep calls `max` (its `first+1` may differ by an ulp).
    swept = pooled("max" if share == 1 else f"first+{share:g}", per_vector[starts], rest, mean, counts)
    assert np.array_equal(swept, pool_windows(per_vector, starts, share=share))
