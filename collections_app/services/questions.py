"""Questions in measure's format: a question with the text that marks its answer, or a control.

Read by measure (`services.measure`) and by a collection's known answers (`services.known_answers`);
one place for the item shape and its limits, so the two cannot drift apart.
"""

from collections.abc import Iterable, Mapping, Sequence

from ragsite.errors import RagsiteError

from ..limits import MAX_QUESTION_CHARS
from ..measure import Question

MAX_QUESTIONS = 50
MAX_MARKER_CHARS = 2000


class InvalidMeasure(RagsiteError):
    code = "invalid_measure"
    status = 400


def parse_item(item: object, number: int) -> Question:
    """One ``{"question", "answer"}`` or ``{"question", "control": true}`` item, as it came (not yet trimmed).

    The shape of a line of a JSON Lines file, of the MCP tool's ``questions`` and of a collection's
    known answers; raises `InvalidMeasure` naming the item (1-based) when it is neither.
    """
    if not isinstance(item, Mapping) or not isinstance(item.get("question"), str):
        raise InvalidMeasure(f'item {number} needs "question", a string')
    unknown = sorted(set(item) - {"question", "answer", "control"})
    if unknown:
        raise InvalidMeasure(f"item {number} has unknown field(s) {', '.join(map(repr, unknown[:5]))}")
    control, answer = item.get("control", False), item.get("answer")
    if control is True and answer is None:
        return Question(item["question"])
    if control in (False, None) and isinstance(answer, str):
        return Question(item["question"], answer)
    raise InvalidMeasure(f'item {number} needs either "answer" (a string) or "control": true, not both')


def parse_items(items: Iterable[object]) -> tuple[list[dict], list[str]]:
    """Split items (see `parse_item`) into ``{"question", "answer"}`` questions and control questions."""
    questions: list[dict] = []
    controls: list[str] = []
    for number, item in enumerate(items, start=1):
        question = parse_item(item, number)
        if question.control:
            controls.append(question.text)
        else:
            questions.append({"question": question.text, "answer": question.answer})
    return questions, controls


def check_questions(questions: Sequence[Question], *, limit: int = MAX_QUESTIONS) -> list[Question]:
    """The questions trimmed, or `InvalidMeasure` naming the first item (1-based) out of bounds."""
    if not questions:
        raise InvalidMeasure("give at least one question")
    if len(questions) > limit:
        raise InvalidMeasure(f"at most {limit} questions and controls together")
    checked: list[Question] = []
    for number, question in enumerate(questions, start=1):
        text = question.text.strip() if isinstance(question.text, str) else ""
        if not 1 <= len(text) <= MAX_QUESTION_CHARS:
            raise InvalidMeasure(f"item {number}: each question is 1 to {MAX_QUESTION_CHARS} characters")
        answer = question.answer
        if answer is not None:
            answer = answer.strip() if isinstance(answer, str) else ""
            if not 1 <= len(answer) <= MAX_MARKER_CHARS:
                raise InvalidMeasure(
                    f"item {number}: each answer marker is 1 to {MAX_MARKER_CHARS} characters"
                )
        checked.append(Question(text, answer))
    return checked


def parse_lines(text: str) -> list[dict]:
    """``question | answer marker`` lines and ``! question`` controls, as items; errors name the line.

    The admin's textarea form of the same items. The first ``|`` ends the question, so a marker may
    hold more (a table row, ``| Office suite | 120 |``); ``\\|`` is a ``|`` in the question (or, for
    symmetry, in the marker).
    """
    items: list[dict] = []
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        if line.startswith("!"):
            control = _unescape(line[1:].strip())
            if not control:
                raise InvalidMeasure(f"line {number}: a control needs a question after the !")
            items.append({"question": control, "control": True})
            continue
        question, marker = _split_line(line)
        if marker is None or not question.strip() or not marker.strip():
            raise InvalidMeasure(
                f"line {number}: write “question | answer marker”, or “! question” for a control "
                "(a question holding a | writes it \\|)"
            )
        items.append({"question": _unescape(question).strip(), "answer": _unescape(marker).strip()})
    return items


def as_line(question: str, answer: str | None) -> str:
    """One item as `parse_lines` reads it back: a control as ``! question``."""
    if answer is None:
        return f"! {question}"
    escaped = question.replace("|", "\\|")
    return f"{escaped} | {answer}"


def _split_line(line: str) -> tuple[str, str | None]:
    """(question, marker) at the first ``|`` not escaped as ``\\|``; (line, None) without one."""
    at = 0
    while (bar := line.find("|", at)) != -1:
        if bar == 0 or line[bar - 1] != "\\":
            return line[:bar], line[bar + 1 :]
        at = bar + 1
    return line, None


def _unescape(text: str) -> str:
    return text.replace("\\|", "|")
