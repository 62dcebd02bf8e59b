"""bench/answers/floor.py's band: the floors that meet issue 12's targets, or by how much none does."""

import math

import pytest

from bench.answers.floor import band, empty, kept


def test_the_band_runs_from_above_the_control_let_through_to_the_answer_that_may_not_be_lost():
    # 20 answers: 5 % may be lost (one), so the floor may be up to the second-lowest answer.
    answers = [0.10, 0.30] + [0.5] * 18
    # 10 controls: 10 % may come back (one), so the floor must be above the second-highest.
    controls = [0.40, 0.25] + [0.05] * 8
    above, at_most = band(answers, controls)
    assert (above, at_most) == (0.25, 0.30)
    for floor in (0.2501, 0.30):
        assert kept(answers, floor) >= 0.95 and empty(controls, floor) >= 0.90
    for floor in (0.25, 0.3001):
        assert kept(answers, floor) < 0.95 or empty(controls, floor) < 0.90


def test_when_the_bands_overlap_no_floor_meets_both_and_the_overlap_is_the_difference():
    # The dev set's shape today: 69 answers (3 may be lost), 20 controls (2 may come back).
    answers = [0.1619, 0.2104, 0.2380, 0.2494] + [0.4] * 65
    controls = [0.3178, 0.2813, 0.2516, 0.2006] + [0.1] * 16
    above, at_most = band(answers, controls)
    assert (above, at_most) == (0.2516, 0.2494)
    assert above - at_most == pytest.approx(0.0022)
    assert kept(answers, 0.22) > 0.95 and empty(controls, 0.22) == 0.85
    assert kept(answers, 0.2517) < 0.95 and empty(controls, 0.2517) == 0.90


def test_an_answer_in_no_paragraph_counts_as_zero_and_a_share_of_0_bounds_nothing():
    assert band([None, 0.5], [0.1], keep=1.0, stop=1.0) == (0.1, 0.0)
    assert band([0.5], [0.1], keep=0.0, stop=1.0) == (0.1, math.inf)
    assert band([0.5], [0.1], keep=1.0, stop=0.0) == (-math.inf, 0.5)


@pytest.mark.parametrize(
    ("answers", "controls", "keep"), [([], [0.1], 0.95), ([0.2], [], 0.95), ([0.2], [0.1], 1.5)]
)
def test_a_band_of_nothing_or_of_shares_outside_0_to_1_is_refused(answers, controls, keep):
    with pytest.raises(ValueError, match="a band needs"):
        band(answers, controls, keep=keep)
