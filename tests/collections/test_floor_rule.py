"""The floor rule is one predicate (`ragsite.fusion.clears_floor`) that every path asks: search's exact
and approximate paths, the unfloored shortcut, and measure's report. Turning it strict in that one place
moves all of them together, and the IVF path still answers as the exact one does."""

import re
from pathlib import Path

import numpy as np
import pytest

from collections_app.limits import MAX_ANSWER_CHARS
from collections_app.measure import measured_floor
from collections_app.ranking import top_at_floor
from ragsite import fusion
from tests.collections.test_search_ivf import _fresh_ivf, ask, index_of, library  # noqa: F401

ROOT = Path(__file__).resolve().parents[2]


def strictly_above(scores, floor):
    return np.asarray(scores) > floor


@pytest.fixture
def strict_rule(monkeypatch):
    """The rule changed where it is written: the function object every importer holds gets the new body."""
    monkeypatch.setattr(fusion.clears_floor, "__code__", strictly_above.__code__)


def at(agent, library, settings, *, ivf: bool, floor: float) -> list:  # noqa: F811
    settings.IVF_MIN_PARAGRAPHS, settings.IVF_NPROBE = (1, 10_000) if ivf else (0, 0)
    paragraphs = ask(agent, library, most=50, min_score=floor, max_chars=MAX_ANSWER_CHARS)["paragraphs"]
    assert not ivf or index_of(library).ivf is not None
    return paragraphs


def test_changing_the_rule_changes_search_on_both_paths_alike(agent, library, settings, monkeypatch):  # noqa: F811
    # Paragraphs sharing no word with the question and pointing away from it score exactly 0: a tie with
    # floor 0, which the rule as shipped lets through.
    at_or_above = at(agent, library, settings, ivf=False, floor=0.0)
    zero = [p for p in at_or_above if p["score"] == 0.0]
    assert zero and at(agent, library, settings, ivf=True, floor=0.0) == at_or_above
    lowest, second = sorted({p["score"] for p in at_or_above} - {0.0})[:2]
    floor = (lowest + second) / 2
    floored = at(agent, library, settings, ivf=False, floor=floor)

    monkeypatch.setattr(fusion.clears_floor, "__code__", strictly_above.__code__)
    above = at(agent, library, settings, ivf=False, floor=0.0)
    assert above == [p for p in at_or_above if p["score"] > 0.0]
    assert at(agent, library, settings, ivf=True, floor=0.0) == above
    # Away from a tie the rules agree, and the paths still do.
    assert at(agent, library, settings, ivf=False, floor=floor) == floored != above
    assert at(agent, library, settings, ivf=True, floor=floor) == floored


def test_the_shortcut_and_measures_counts_follow_the_rule(strict_rule):
    scores = np.array([0.0, 0.5, 0.25])
    assert top_at_floor(scores, 0.0, 10).tolist() == [1, 2]
    assert top_at_floor(scores, 0.25, 10, readable=np.array([True, True, True])).tolist() == [1]
    report = measured_floor([0.0, 0.5], [0.0, 0.7], keep=0.95)
    # The counts are those search would give at that floor: the rows it lets through.
    assert report["floor"] == 0.0
    assert report["kept"] == len(top_at_floor(np.array([0.0, 0.5]), 0.0, 10)) == 1
    assert report["controls_above"] == len(top_at_floor(np.array([0.0, 0.7]), 0.0, 10)) == 1


def test_no_other_module_compares_a_score_with_the_floor():
    """The predicate's one home: a comparison against a floor written anywhere else is a second rule."""
    comparison = re.compile(r"(>=?|<=?)\s*(plan\.|self\.)?floor\b|\bfloor\s*(>=?|<=?)\s*0")
    bounds = re.compile(r"<=?\s*floor\s*<=?")  # a floor's own range checked (0 <= floor <= 1), not a score
    offenders = []
    for package in ("collections_app", "memory_app", "ragsite", "config"):
        for path in (ROOT / package).rglob("*.py"):
            if path == ROOT / "ragsite" / "fusion.py" or "migrations" in path.parts:
                continue
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                code = bounds.sub("", line.split("#")[0])
                if comparison.search(code):
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)
