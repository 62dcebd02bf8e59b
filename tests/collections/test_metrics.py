"""collections_app.metrics on examples worked by hand (the arithmetic is in the comments)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from collections_app.metrics import dcg, ndcg_at_k, recall_at_k, reciprocal_rank


def test_dcg_discounts_by_log2_of_rank_plus_one():
    # 3/log2(2) + 2/log2(3) + 0/log2(4) + 1/log2(5) = 3 + 1.26186 + 0 + 0.43068
    assert dcg([3, 2, 0, 1]) == pytest.approx(3 + 2 / math.log2(3) + 1 / math.log2(5))


def test_binary_ndcg_at_ten():
    # Relevant: b and e. Ranked: a b c d e -> gains 0 1 0 0 1.
    # DCG = 1/log2(3) + 1/log2(6) = 0.63093 + 0.38685 = 1.01778
    # IDCG (two relevant, ranks 1 and 2) = 1/log2(2) + 1/log2(3) = 1 + 0.63093 = 1.63093
    # nDCG = 1.01778 / 1.63093 = 0.62405
    value = ndcg_at_k(["a", "b", "c", "d", "e"], {"b": 1, "e": 1}, k=10)
    assert value == pytest.approx((1 / math.log2(3) + 1 / math.log2(6)) / (1 + 1 / math.log2(3)))
    assert value == pytest.approx(0.62405, abs=1e-5)


def test_graded_ndcg_with_a_cut_off():
    # Gains: x 3, y 2, z 1. Ranked: y q x z; k = 2 keeps y q -> gains 2 0.
    # DCG@2 = 2/log2(2) + 0 = 2. IDCG@2 = 3/log2(2) + 2/log2(3) = 3 + 1.26186 = 4.26186.
    # nDCG@2 = 2 / 4.26186 = 0.46928
    value = ndcg_at_k(["y", "q", "x", "z"], {"x": 3, "y": 2, "z": 1}, k=2)
    assert value == pytest.approx(2 / (3 + 2 / math.log2(3)))
    assert value == pytest.approx(0.46928, abs=1e-5)


def test_ndcg_is_one_for_the_ideal_ranking_and_zero_with_nothing_relevant():
    assert ndcg_at_k([1, 2, 3], {1: 2, 2: 1}) == pytest.approx(1.0)
    assert ndcg_at_k([1, 2, 3], {}) == 0.0
    assert ndcg_at_k([1, 2, 3], {9: 0}) == 0.0  # judged but not relevant
    assert ndcg_at_k([], {1: 1}) == 0.0


def test_a_repeated_id_is_counted_once():
    # Ranked b b: only the first b counts. DCG = 1; IDCG (b, e) = 1 + 1/log2(3).
    assert ndcg_at_k(["b", "b"], {"b": 1, "e": 1}) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    # The repeat takes no place: the first two distinct ids of b b e are b and e -> 2/2.
    assert recall_at_k(["b", "b", "e"], {"b", "e"}, k=2) == 1.0


def test_recall_at_k():
    # Relevant {a, c, x}; first 3 of a b c d hold a and c -> 2/3. First 1 holds a -> 1/3.
    assert recall_at_k(["a", "b", "c", "d"], {"a", "c", "x"}, k=3) == pytest.approx(2 / 3)
    assert recall_at_k(["a", "b", "c", "d"], {"a", "c", "x"}, k=1) == pytest.approx(1 / 3)
    assert recall_at_k(["a"], set(), k=5) == 0.0


def test_reciprocal_rank():
    # First relevant (c) at rank 3 -> 1/3; with k = 2 it is not reached -> 0.
    assert reciprocal_rank(["a", "b", "c", "d"], {"c", "d"}) == pytest.approx(1 / 3)
    assert reciprocal_rank(["a", "b", "c", "d"], {"c", "d"}, k=2) == 0.0
    assert reciprocal_rank(["c"], {"c"}) == 1.0
    assert reciprocal_rank(["a"], set()) == 0.0


def test_k_must_be_positive():
    with pytest.raises(ValueError):
        ndcg_at_k(["a"], {"a": 1}, k=0)


def _plain_edit_distance(read: str, truth: str) -> int:
    """The textbook Wagner-Fischer table, cell by cell: what character_error_rate is checked against."""
    previous = list(range(len(truth) + 1))
    for i, mine in enumerate(read, start=1):
        current = [i]
        for j, theirs in enumerate(truth, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (mine != theirs)))
        previous = current
    return previous[-1]


@given(st.text(alphabet="ab c\n", max_size=30), st.text(alphabet="abc é\n", min_size=1, max_size=30))
def test_character_error_rate_is_the_edit_distance_over_the_truths_length(read, truth):
    from collections_app.metrics import character_error_rate

    flat_read, flat_truth = " ".join(read.split()), " ".join(truth.split())
    expected = (
        _plain_edit_distance(flat_read, flat_truth) / len(flat_truth)
        if flat_truth
        else float(bool(flat_read))
    )
    assert character_error_rate(read, truth) == pytest.approx(expected)
