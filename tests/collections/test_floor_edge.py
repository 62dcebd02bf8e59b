"""The floor lets through a score exactly at it (DESIGN.md: "at or above the floor"), on every path
that applies it: the seed audit's mutations M11/M12 (>= turned into >) left every test green."""

import numpy as np
import pytest

from collections_app.ranking import clears_floor, top_at_floor

SCORES = np.array([0.1, 0.25, 0.5, 0.25, 0.2])


def test_a_score_equal_to_the_floor_clears_it():
    assert clears_floor(SCORES, 0.25).tolist() == [False, True, True, True, False]


@pytest.mark.parametrize(
    "readable", [None, np.array([True, True, True, True, False]), np.array([True, False, True, True, True])]
)
def test_every_path_keeps_the_rows_at_the_floor(readable):
    kept = top_at_floor(SCORES, 0.25, 10, readable=readable).tolist()
    expected = [row for row in (2, 1, 3) if readable is None or readable[row]]
    assert kept == expected
    # Candidates given as rows (an approximate search's, a lexical top-k's): the same rule.
    rows = np.array([4, 3, 2])
    assert top_at_floor(SCORES[rows], 0.25, 10, rows=rows).tolist() == [2, 3]


def test_a_measured_floors_report_counts_the_answers_and_controls_at_it():
    """The measured floor's report says how many known answers it keeps and how many controls still get
    paragraphs, both "at or above": an answer found at 0 sets a floor of 0, which keeps it, and a
    control at that score still gets paragraphs."""
    from collections_app.measure import measured_floor

    report = measured_floor([0.0, 0.5], [0.0, 0.7], keep=0.95)
    assert report["floor"] == 0.0 and report["rule"] == "keep"
    assert report["kept"] == 2 and report["controls_above"] == 2
