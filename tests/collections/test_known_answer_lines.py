"""The admin's textarea form of known answers: `question | marker` lines and `! control` lines."""

from collections_app import measure as m
from collections_app.services import known_answers as k


def test_a_marker_may_hold_bars_and_a_question_escapes_its_own():
    """docs/measure.md recommends table answers; their markers are table rows."""
    lines = "What does the office suite cost? | | Office suite | 120 |\nIs A \\| B the rule? | A or B\n"
    items = k.parse_lines(lines)
    assert items == [
        {"question": "What does the office suite cost?", "answer": "| Office suite | 120 |"},
        {"question": "Is A | B the rule?", "answer": "A or B"},
    ]
    back = k.as_lines(m.Question(i["question"], i["answer"]) for i in items)
    assert k.parse_lines(back) == items
