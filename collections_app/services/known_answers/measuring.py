"""Measuring a build against its collection's known answers, after its commit or before its swap
(the package's docstring says how and what is written)."""

import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from django.db import transaction
from django.utils import timezone

from ragsite import embedding, tracing
from ragsite.embedders import EmbeddingError
from ragsite.errors import RagsiteError
from ragsite.fusion import FUSION_WEIGHT, floor_is_open

from ... import conf
from ...conf import settings
from ...errors import KnownAnswersLost
from ...limits import DEFAULT_MOST
from ...measure import Question, floor_range, measured_floor, outcomes
from ...models import (
    BuildRun,
    Collection,
    CollectionBuilt,
    KnownAnswer,
    KnownAnswersReport,
    Paragraph,
)
from ...text.chunking import returns_sections
from .. import webhooks
from ..search.rows import search_state
from .scratch import STORED_FIELDS, CandidateRow, asked_index, question_vectors
from .the_set import _enqueue, known_answers, live_build_id, parse_jsonl, set_known_answers

logger = logging.getLogger("ragsite.known_answers")


DEPTH = DEFAULT_MOST  # found@5: how many paragraphs a search returns unless asked for more
# The sample handbook's own questions and controls (beside sample_docs/, so a build never reads it as a
# document).
SAMPLE_SET = Path(__file__).resolve().parents[2] / "sample_known_answers.jsonl"
LOST_NAMED = 10  # lost questions a warning names before saying "and N more"


def measure_again(*, collection_ids: Iterable[int]) -> None:
    """Queue a new measurement of each collection's live build, once this transaction commits: what search
    sees changed without a build (a document or paragraph switched off or on)."""
    for collection in Collection.objects.filter(
        pk__in=set(collection_ids), known_answers__isnull=False
    ).distinct():
        live = live_build_id(collection)
        if live is not None:
            transaction.on_commit(tracing.keeping_context(lambda live=live: _enqueue(live)))


def after_build(*, run: BuildRun, measured: dict | None) -> None:
    """Once a build has committed: store the measurement the gate made, or queue one for a task."""
    if measured is not None:
        _save(run, measured)
    elif KnownAnswer.objects.filter(collection_id=run.collection_id).exists():
        transaction.on_commit(tracing.keeping_context(lambda: _enqueue(run.pk)))


def measure_build(*, build_id: int) -> KnownAnswersReport | None:
    """Ask the live build `build_id` its collection's known answers and store the report (the task's service).

    Returns None, writing nothing, when there is nothing to measure: no such successful build, no
    known answers, or a later build already live (whose own task measures it). A measurement that
    cannot be made (the embedder is down, the model changed) is stored as a failed report.
    """
    run = BuildRun.objects.select_related("collection__agent").filter(pk=build_id).first()
    if run is None or run.status not in BuildRun.LIVE:
        return None
    collection = run.collection
    questions = known_answers(collection)
    if not questions or live_build_id(collection) != run.pk:
        return None
    built = CollectionBuilt.objects.filter(collection=collection).first()
    paragraphs = _live_paragraphs(collection)
    if built is None or live_build_id(collection) != run.pk:
        return None  # a build landed while the rows were read: they may be either build's
    try:
        measurement = _measure(
            collection,
            questions,
            paragraphs,
            model=built.model,
            dimensions=built.dimensions,
            analyzer=built.analyzer,
            before=run.pk,
        )
    except (RagsiteError, EmbeddingError) as exc:
        message = exc.message if isinstance(exc, RagsiteError) else f"the embedder failed: {exc}"
        measurement = {
            "status": KnownAnswersReport.FAILED,
            "error": message[:2000],
            "answers": sum(1 for q in questions if not q.control),
            "controls": sum(1 for q in questions if q.control),
        }
    return _save(run, measurement)


def gate_build(
    *, collection: Collection, run: BuildRun, candidate: Callable[[], list[CandidateRow]]
) -> dict | None:
    """With KNOWN_ANSWERS_GATE set, measure a build's candidate paragraphs before its swap.

    ``candidate`` gives the paragraphs the swap would leave (see `swap.candidate_paragraphs`).
    Refuses the build (`KnownAnswersLost`, which the build records as refused) when it loses more
    known answers than the gate allows, storing the candidate's report so people see which. Returns
    the measurement for `after_build` to store, or None when there is no gate or no known answers.
    An embedder failure here fails the build: a gate that cannot measure does not wave a build through.
    """
    gate = conf.known_answers_gate()
    if gate is None:
        return None
    questions = known_answers(collection)
    if not questions:
        return None
    embedder = embedding.get_embedder()
    measurement = _measure(
        collection,
        questions,
        candidate(),
        model=embedder.model,
        dimensions=embedder.dimensions,
        analyzer=collection.analyzer,  # what the build being gated writes its index with
        before=run.pk,
    )
    lost = measurement["lost"]
    if len(lost) > gate:
        _save(run, measurement)
        # Counts only: this message reaches the server log, and the questions must not.
        raise KnownAnswersLost(
            f"the build loses {len(lost)} of {measurement['answers']} known answers, more than "
            f"KNOWN_ANSWERS_GATE allows ({gate}); the collection keeps its current paragraphs"
        )
    return measurement


def _live_paragraphs(collection: Collection) -> list[CandidateRow]:
    """The live collection's paragraphs as a search loads them.

    ``searched`` is search's own row mask before reader labels, from the statement every search reads
    (`rows.search_state`): not in a document in review, refused or switched off, not switched off itself.
    A document the librarian had disabled was once reported "found, rank 1" while no search returned it.
    """
    _built, documents, paragraphs = search_state(collection)
    held_documents, held_paragraphs = set(documents.tolist()), set(paragraphs.tolist())
    rows = (
        Paragraph.objects.filter(collection=collection)
        .order_by("ordinal")
        .values_list("pk", "document_id", *STORED_FIELDS)
    )
    return [
        CandidateRow(document, document not in held_documents and pk not in held_paragraphs, *rest)
        for pk, document, *rest in rows.iterator(chunk_size=2000)
    ]


def _measure(
    collection: Collection,
    questions: Sequence[Question],
    paragraphs: Sequence[CandidateRow],
    *,
    model: str,
    dimensions: int,
    analyzer: str,
    before: int,
) -> dict:
    """The report's fields: every question asked unfloored (scores, the bands, the measured floor),
    then at the floor in force (found@1/@5), and the answers lost since the live build before ``before``."""
    # Only the rows a search ranks, with their entries as the index writer gives them with ENTRIES on.
    index = asked_index(paragraphs, dimensions, analyzer, entries=bool(settings.ENTRIES))
    vectors = None
    if index.matrix is not None:
        vectors = question_vectors(collection, questions, model, index.matrix.shape[1])
    around = int(collection.around if collection.around is not None else settings.AROUND)

    def ask(floor: float):
        return outcomes(
            index,
            questions,
            vectors,
            weight=FUSION_WEIGHT,
            most=DEPTH,
            around=around,
            floor=floor,
            sections=returns_sections(collection.method),
            max_chars=int(settings.ANSWER_MAX_CHARS),
        )

    answered, controls = ask(0.0)
    answer_scores = [a["score"] for a in answered if a["found"]]
    control_scores = [c["top_score"] or 0.0 for c in controls]
    bands = floor_range(answer_scores, control_scores)
    read_off = measured_floor(answer_scores, control_scores, keep=conf.measured_floor_keep())
    floor, source = collection.floor_in_force(measured=read_off["floor"], default=float(settings.MIN_SCORE))
    at_floor = (answered, controls) if floor_is_open(floor) else ask(floor)

    results = _results(questions, (answered, controls), at_floor)
    found = [r for r in results if not r["control"] and r["found"]]
    lost = _lost(collection, results, before)
    measurement = {
        "status": KnownAnswersReport.MEASURED,
        "answers": len(answered),
        "controls": len(controls),
        # The answer asked for one paragraph holds the marker, not rank 1 of a merged deeper answer.
        "found_at_1": sum(1 for r in found if r["found_at_1"]),
        "found_at_5": len(found),
        "floor": floor,
        "floor_source": source,
        "lowest_answer": bands["lowest_answer"],
        "highest_control": bands["highest_control"],
        "separates": bands["separates"],
        "measured_floor": read_off["floor"],
        "results": results,
        "lost": lost,
    }
    measurement["warnings"] = _warnings(measurement, read_off, collection)
    return measurement


def _results(questions: Sequence[Question], unfloored, at_floor) -> list[dict]:
    """One row per item, in the set's order: found and rank at the floor, scores unfloored."""
    pending = [iter(unfloored[0]), iter(unfloored[1]), iter(at_floor[0]), iter(at_floor[1])]
    results = []
    for question in questions:
        if question.control:
            free, floored = next(pending[1]), next(pending[3])
            results.append(
                {
                    "question": question.text,
                    "control": True,
                    "top_score": free["top_score"],
                    "returned": floored["returned"],
                }
            )
        else:
            free, floored = next(pending[0]), next(pending[2])
            results.append(
                {
                    "question": question.text,
                    "answer": question.answer,
                    "control": False,
                    "found": floored["found"],
                    "rank": floored["rank"],
                    "found_at_1": floored["found_at_1"],
                    "score": free["score"],
                    "top_score": free["top_score"],
                }
            )
    return results


def _lost(collection: Collection, results: Sequence[dict], before: int) -> list[str]:
    """Questions the previous live build found (at its floor) and this one does not, the same marker asked."""
    previous = (
        KnownAnswersReport.objects.of_live_builds()
        .filter(collection=collection, build_id__lt=before)
        .order_by("-build_id")
        .values_list("results", flat=True)
        .first()
    )
    if not previous:
        return []
    found_before = {
        (r["question"], r.get("answer")) for r in previous if not r.get("control") and r.get("found")
    }
    return [
        r["question"]
        for r in results
        if not r["control"] and not r["found"] and (r["question"], r["answer"]) in found_before
    ]


# Whose view a per-reader collection's known answers are measured in: every label held, so a reader with
# fewer labels may find less. Said on every report of such a collection (admin, API, build_status).
EVERY_LABEL = (
    "measured as a reader holding every label would search (labels are not applied): a reader "
    "with fewer labels may not find every answer counted here"
)


def _warnings(measurement: dict, read_off: dict, collection: Collection) -> list[str]:
    warnings = [EVERY_LABEL] if collection.per_reader else []
    lost, answers = measurement["lost"], measurement["answers"]
    if lost:
        named = "; ".join(f"“{q}”" for q in lost[:LOST_NAMED])
        more = f"; and {len(lost) - LOST_NAMED} more" if len(lost) > LOST_NAMED else ""
        warnings.append(f"{len(lost)} of {answers} known answers no longer found: {named}{more}")
    if not collection.floor_measured:
        return warnings
    if collection.per_reader:
        warnings.append(
            "this collection answers per reader, so its configured floor applies, not the measured one"
        )
        return warnings
    if read_off["floor"] is None:
        warnings.append(
            f"no known answer was found, so no floor was measured; the floor stays at "
            f"{measurement['floor']} ({measurement['floor_source']})"
        )
    elif read_off["rule"] == "keep":
        found = len([s for s in measurement["results"] if not s["control"] and s["score"] is not None])
        why = (
            "there are no controls, so nothing shows how high a question the documents cannot answer scores"
            if not measurement["controls"]
            else "answers and controls do not separate "
            f"(lowest answer {measurement['lowest_answer']}, highest "
            f"control {measurement['highest_control']}); {read_off['controls_above']} of "
            f"{measurement['controls']} controls will get paragraphs back"
        )
        warnings.append(
            f"the measured floor {read_off['floor']} keeps {read_off['kept']} of {found} answers found: {why}"
        )
    return warnings


# What a report holds before a measurement fills it in: a measurement that replaces an earlier one
# (the set changed) or fails leaves nothing of the earlier one behind.
BLANK = {
    "found_at_1": None,
    "found_at_5": None,
    "floor": None,
    "floor_source": "",
    "lowest_answer": None,
    "highest_control": None,
    "separates": None,
    "measured_floor": None,
    "results": [],
    "lost": [],
    "warnings": [],
    "error": "",
}


def _save(run: BuildRun, measurement: dict) -> KnownAnswersReport:
    report, _created = KnownAnswersReport.objects.update_or_create(
        build=run,
        defaults={**BLANK, **measurement, "collection_id": run.collection_id, "measured_at": timezone.now()},
    )
    collection = run.collection
    logger.info(
        "known answers of build %s (%s/%s): %s, %s of %s found at %d, %d lost",
        run.pk,
        collection.agent.agent_id,
        collection.name,
        report.status,
        report.found_at_5,
        report.answers,
        DEPTH,
        len(report.lost),
    )
    if run.status in BuildRun.LIVE:  # a refused build's loss is told with its refusal (webhooks)
        webhooks.known_answers_measured(report=report, run=run)
    return report


def give_sample_set(*, collection: Collection) -> list[Question] | None:
    """The demo: give the sample handbook its shipped known answers, its floor read off them — once.

    Returns the set given, or None when the collection already had one (a person's set is never replaced).
    """
    if KnownAnswer.objects.filter(collection=collection).exists():
        return None
    items = parse_jsonl(SAMPLE_SET.read_bytes())
    return set_known_answers(collection=collection, items=items, floor_measured=True)
