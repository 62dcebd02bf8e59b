"""The set: a collection's known answers and controls, read, checked and replaced (docs/measure.md).

Replacing the set queues a new measurement of the live build (`_enqueue`), read by `measuring` too.
"""

import json
import logging
from collections.abc import Iterable, Sequence

from django.db import transaction

from ragsite import queue, tracing
from ragsite.bodies import refuse_nul
from ragsite.errors import Conflict

from ...errors import InvalidKnownAnswers
from ...measure import Question, normalise
from ...models import (
    BuildRun,
    Collection,
    KnownAnswer,
    KnownAnswersReport,
)
from ..questions import InvalidMeasure, as_line, check_questions, parse_item
from ..questions import parse_lines as parse_lines  # the admin's textarea form, read here too

logger = logging.getLogger("ragsite.known_answers")


MAX_KNOWN_ANSWERS = 200
MAX_FILE_BYTES = 1024 * 1024  # 200 items of 2,000-character questions and markers fit with room to spare


# --- The set ------------------------------------------------------------------------------


def parse_jsonl(data: bytes | str) -> list[object]:
    """The items of a JSON Lines file (blank lines skipped); errors name the line, never quote it."""
    if len(data) > MAX_FILE_BYTES:
        raise InvalidKnownAnswers(f"the file is larger than {MAX_FILE_BYTES // 1024} KiB")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise InvalidKnownAnswers("the file is not UTF-8 text") from None
    items = []
    for number, line in enumerate(data.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise InvalidKnownAnswers(f"line {number} is not JSON: {exc.msg}") from None
    return items


def check_items(items: Sequence[object]) -> list[Question]:
    """Items in measure's format, checked: at most 200, each within measure's limits, no question twice."""
    if not isinstance(items, (list, tuple)):
        raise InvalidKnownAnswers("known answers are a list of items")
    if len(items) > MAX_KNOWN_ANSWERS:
        raise InvalidKnownAnswers(f"at most {MAX_KNOWN_ANSWERS} known answers and controls together")
    refuse_nul(items, field="a known answer")
    try:
        checked = check_questions(
            [parse_item(item, n) for n, item in enumerate(items, 1)], limit=MAX_KNOWN_ANSWERS
        )
    except InvalidMeasure as exc:
        raise InvalidKnownAnswers(exc.message) from None
    # Reports and regressions name a question by its text, so the same question twice would be ambiguous.
    seen: dict[str, int] = {}
    for number, question in enumerate(checked, start=1):
        first = seen.setdefault(normalise(question.text), number)
        if first != number:
            raise InvalidKnownAnswers(f"item {number} asks the same question as item {first}")
    return checked


def known_answers(collection: Collection) -> list[Question]:
    """The collection's set, in the librarian's order."""
    return [
        Question(text, answer or None)
        for text, answer in KnownAnswer.objects.filter(collection=collection)
        .order_by("position")
        .values_list("question", "answer")
    ]


def as_items(questions: Iterable[Question]) -> list[dict]:
    """The set in measure's JSON Lines shape."""
    return [
        {"question": q.text, "control": True} if q.control else {"question": q.text, "answer": q.answer}
        for q in questions
    ]


def as_lines(questions: Iterable[Question]) -> str:
    """The set in the admin's textarea form (``question | marker`` / ``! control``)."""
    return "\n".join(as_line(q.text, None if q.control else q.answer) for q in questions)


def set_known_answers(
    *,
    collection: Collection,
    items: Sequence[object],
    floor_measured: bool | None = None,
    allow_per_reader: bool = True,
) -> list[Question]:
    """Replace `collection`'s known answers with ``items`` (an empty list clears them), all or nothing.

    ``floor_measured`` True/False also sets whether the collection's floor is read off them. The
    collection's live build is then measured against the new set by a task (on commit), so the
    report follows the set without waiting for a rebuild. ``allow_per_reader`` False (the API)
    refuses a per-reader collection: markers chosen by an agent and a found/not-found answer would
    tell it whether some paragraph holds a text, whoever may read that paragraph.
    """
    if collection.per_reader and not allow_per_reader:
        raise Conflict(
            f'collection "{collection.name}" answers per reader: its known answers are set by staff, '
            "in the admin or with manage.py known_answers",
            code="per_reader",
        )
    if floor_measured and collection.per_reader:
        raise Conflict(
            f'collection "{collection.name}" answers per reader, so its floor is the configured one: a floor '
            "measured over every paragraph would depend on paragraphs a reader may not read",
            code="per_reader_floor",
        )
    checked = check_items(items) if items else []
    with transaction.atomic():
        # The same set again (a client retrying, or looping) rewrites nothing and queues no second
        # measurement of the same build: each one embeds every question. A measurement that is
        # missing or failed is queued again, so a PUT stays the way to retry one.
        unchanged = checked == known_answers(collection)
        if not unchanged:
            KnownAnswer.objects.filter(collection=collection).delete()
            KnownAnswer.objects.bulk_create(
                [
                    KnownAnswer(collection=collection, position=n, question=q.text, answer=q.answer or "")
                    for n, q in enumerate(checked, start=1)
                ]
            )
        if floor_measured is not None and floor_measured != collection.floor_measured:
            collection.floor_measured = floor_measured
            Collection.objects.filter(pk=collection.pk).update(floor_measured=floor_measured)
        live = live_build_id(collection)
        measured = (
            unchanged
            and KnownAnswersReport.objects.filter(build_id=live, status=KnownAnswersReport.MEASURED).exists()
        )
        if checked and live is not None and not measured:
            transaction.on_commit(tracing.keeping_context(lambda: _enqueue(live)))
    logger.info(
        "known answers of %s/%s set: %d items", collection.agent.agent_id, collection.name, len(checked)
    )
    return checked


def live_build_id(collection: Collection) -> int | None:
    """The build the collection answers from: its latest successful one (builds of a collection run one at a
    time)."""
    return (
        BuildRun.objects.filter(collection=collection, status__in=BuildRun.LIVE)
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )


def _enqueue(build_id: int) -> None:
    # In the build's trace: the known answers are its last step.
    queue.enqueue("collections_app.tasks.measure_known_answers", build_id, name=f"known-answers-{build_id}")
