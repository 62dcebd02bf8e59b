"""Known answers (issue 17): a collection's own questions, asked of every build; regressions, the
gate, the floor."""

import json
import logging

import numpy as np
import pytest
from django.apps import apps

from collections_app import measure as m
from collections_app.models import BuildRun, Collection, KnownAnswer, KnownAnswersReport, ModelCall, Paragraph
from collections_app.services import known_answers as k
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from ragsite.errors import RagsiteError
from tests.conftest import HANDBOOK, SAMPLE_DOCS

pytestmark = pytest.mark.django_db

ITEMS = [
    {"question": "how much annual leave carries over", "answer": "capped at five days"},
    {"question": "what is mileage reimbursed at per kilometre", "answer": "0.42 per kilometre"},
    {"question": "must laptops use disk encryption", "answer": "full-disk encryption"},
    {"question": "what is the recipe for sourdough bread", "control": True},
    {"question": "where are lost badges reported", "answer": "reported to reception"},
]
ANSWERS = [item for item in ITEMS if "answer" in item]


@pytest.fixture
def build(django_capture_on_commit_callbacks):
    """Build a collection the way the worker does: the build commits, then its on-commit task measures it."""

    def run(collection) -> BuildRun:
        with django_capture_on_commit_callbacks(execute=True):
            done = build_collection(collection=collection)
        done.refresh_from_db()
        return done

    return run


@pytest.fixture
def handbook(agent, knowledge_folder, build):
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK)
    k.set_known_answers(collection=collection, items=ITEMS)
    assert build(collection).status == BuildRun.SUCCEEDED
    return collection


def report_of(run: BuildRun) -> KnownAnswersReport:
    return KnownAnswersReport.objects.get(build=run)


def found_by_search(collection, question, marker, **kwargs) -> bool:
    answer = search_collection(agent=collection.agent, collection=collection, question=question, **kwargs)
    return any(m.normalise(marker) in m.normalise(p["text"]) for p in answer["paragraphs"])


# --- The floor read off known answers (pure) -------------------------------------------------


def test_a_floor_between_separate_bands_is_their_midpoint():
    read = m.measured_floor([0.6, 0.5, 0.4], [0.1, 0.2], keep=0.95)
    assert read == {"floor": 0.3, "rule": "midpoint", "kept": 3, "controls_above": 0}


def test_when_the_bands_overlap_the_floor_keeps_the_chosen_share_and_counts_controls_above_it():
    answers = [round(0.2 + 0.01 * i, 6) for i in range(40)]  # 0.20 … 0.59
    read = m.measured_floor(answers, [0.1, 0.25, 0.3], keep=0.95)
    # Set at the 2nd lowest of 40 (⌊0.05 × 41⌋): on average 39/41 of unseen answers score above it.
    assert (read["rule"], read["kept"], read["floor"]) == ("keep", 39, 0.209999)
    assert read["controls_above"] == 2
    assert m.measured_floor(answers, [0.5], keep=1.0)["kept"] == 40
    assert m.measured_floor(answers, [0.5], keep=0.9)["kept"] == 37  # ⌊0.1 × 41⌋ = 4th lowest


def test_too_few_answers_to_spare_one_put_the_floor_under_the_lowest():
    answers = [0.3 + 0.001 * i for i in range(38)]  # 38: ⌊0.05 × 39⌋ = 1, no answer can be given up at 0.95
    assert m.measured_floor(answers, [0.4], keep=0.95)["kept"] == 38
    assert m.measured_floor([*answers, 0.5], [0.4], keep=0.95)["kept"] == 38  # 39: the lowest is spared


def test_without_controls_the_floor_keeps_the_share_and_without_answers_there_is_none():
    assert m.measured_floor([0.5, 0.4], [], keep=0.95) == {
        "floor": 0.399999,
        "rule": "keep",
        "kept": 2,
        "controls_above": 0,
    }
    assert m.measured_floor([], [0.3], keep=0.95)["floor"] is None


def test_a_floor_read_off_a_rounded_score_still_keeps_that_answer():
    # The lowest answer's true score is a hair under its rounded report; the floor must not cut it.
    true_score = 0.2345674
    read = m.measured_floor([round(true_score, 6), 0.5], [0.3], keep=1.0)
    assert read["floor"] <= true_score


def test_rows_outside_the_searchable_mask_never_rank():
    rows = [
        m.Row(ordinal=i, document=i, start=0, end=len(t), text=t, section="")
        for i, t in enumerate(["alpha beta", "alpha gamma"])
    ]
    index = m.ScratchIndex(rows=rows, bm25=m.BM25Index.from_texts(r.text for r in rows), matrix=None)
    runs = m.rank(index, "alpha", None, weight=0.5, most=5, around=0, searchable=np.array([False, True]))
    assert [r.text for r in runs] == ["alpha gamma"]


# --- The set ------------------------------------------------------------------------------------


def test_the_set_keeps_the_librarians_order_and_is_replaced_whole(agent):
    collection = create_collection(agent=agent, name="notes")
    k.set_known_answers(collection=collection, items=ITEMS)
    assert k.as_items(k.known_answers(collection)) == ITEMS
    with pytest.raises(RagsiteError, match="item 2"):
        k.set_known_answers(collection=collection, items=[ITEMS[0], {"question": "no marker"}])
    assert k.as_items(k.known_answers(collection)) == ITEMS  # nothing half-written
    k.set_known_answers(collection=collection, items=[])
    assert not KnownAnswer.objects.filter(collection=collection).exists()


@pytest.mark.parametrize(
    ("items", "message"),
    [
        ([{"question": f"q{i}", "answer": "a"} for i in range(201)], "at most 200"),
        ([ITEMS[0], {"question": "x" * 2001, "answer": "a"}], "item 2: each question is 1 to 2000"),
        ([{"question": "q", "answer": "a" * 2001}], "item 1: each answer marker is 1 to 2000"),
        ([{"question": "q", "answer": "  "}], "answer marker"),
        ([{"question": "q", "answer": "a", "control": True}], "not both"),
        ([{"question": "q", "answer": "a", "weight": 2}], "unknown field"),
        (["just a string"], 'needs "question"'),
        (
            [ITEMS[0], {"question": "  How much Annual leave carries over ", "answer": "b"}],
            "item 2 asks the same",
        ),
        ("not a list", "a list"),
    ],
)
def test_a_bad_set_is_refused_with_a_clear_error(agent, items, message):
    collection = create_collection(agent=agent, name="notes")
    with pytest.raises(RagsiteError, match=message) as raised:
        k.set_known_answers(collection=collection, items=items)
    assert (raised.value.code, raised.value.status) == ("invalid_known_answers", 400)


def test_two_hundred_items_are_accepted(agent):
    collection = create_collection(agent=agent, name="notes")
    k.set_known_answers(
        collection=collection, items=[{"question": f"q{i}", "answer": "a"} for i in range(200)]
    )
    assert KnownAnswer.objects.filter(collection=collection).count() == 200


def test_lines_and_json_lines_read_into_the_same_items():
    lines = (
        "how much annual leave carries over | capped at five days\n\n"
        "! what is the recipe for sourdough bread\n"
    )
    assert k.parse_lines(lines) == ITEMS[:1] + ITEMS[3:4]
    jsonl = "\n".join(json.dumps(item) for item in ITEMS) + "\n\n"
    assert k.parse_jsonl(jsonl.encode()) == ITEMS
    assert k.parse_lines(k.as_lines(m.Question(i["question"], i.get("answer")) for i in ITEMS)) == ITEMS


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a question without a marker", "line 1: write"),
        ("ok | fine\n!", "line 2: a control needs"),
        ("q | ", "line 1"),
    ],
)
def test_bad_lines_are_named(text, message):
    with pytest.raises(RagsiteError, match=message):
        k.parse_lines(text)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"question": "q", "answer": "a"}\n{not json}\n', "line 2 is not JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b" " * (k.MAX_FILE_BYTES + 1), "larger than"),
    ],
)
def test_bad_json_lines_are_named(data, message):
    with pytest.raises(RagsiteError, match=message):
        k.parse_jsonl(data)


# --- Measured after every build ----------------------------------------------------------------


def test_a_build_is_measured_after_it_commits_and_the_report_agrees_with_search(handbook):
    run = handbook.runs.get()
    report = report_of(run)
    assert report.status == "measured" and (report.answers, report.controls) == (4, 1)
    assert report.floor_source == "default" and report.floor == 0.22
    # found@5 is what a search at the collection's settings (most 5, its floor, its around) returns.
    for result in report.results:
        if not result["control"]:
            assert result["found"] == found_by_search(handbook, result["question"], result["answer"])
    assert report.found_at_5 == sum(r["found"] for r in report.results if not r["control"])
    assert report.found_at_1 <= report.found_at_5
    # Scores are read unfloored: every found answer has one, the control its best.
    assert all(r["score"] is not None for r in report.results if not r["control"] and r["found"])
    control = next(r for r in report.results if r["control"])
    assert report.highest_control == control["top_score"]
    assert report.separates == (report.lowest_answer > report.highest_control)


def test_the_build_does_not_wait_for_the_measurement(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK)
    k.set_known_answers(collection=collection, items=ITEMS)
    run = build_collection(collection=collection)  # inside the test's transaction: nothing is committed
    assert run.status == BuildRun.SUCCEEDED
    assert not KnownAnswersReport.objects.filter(build=run).exists()


def test_measuring_writes_nothing_of_the_live_collection_but_the_report_row(handbook):
    run = handbook.runs.get()
    KnownAnswersReport.objects.all().delete()

    def snapshot():
        return {
            model.__name__: list(model.objects.order_by("pk").values())
            for model in apps.get_app_config("collections_app").get_models()
            if model is not KnownAnswersReport
        }

    before = snapshot()
    report = k.measure_build(build_id=run.pk)
    assert snapshot() == before
    assert list(KnownAnswersReport.objects.values_list("pk", flat=True)) == [report.pk]


def test_a_build_that_loses_an_answer_warns_naming_the_question(handbook, knowledge_folder, build):
    knowledge_folder("handbook", {"travel.md": "# Travel\n\nTrains are booked in standard class.\n"})
    run = build(handbook)
    assert run.status == BuildRun.SUCCEEDED
    report = report_of(run)
    assert report.lost == ["what is mileage reimbursed at per kilometre"]
    first = report_of(handbook.runs.order_by("id").first())
    assert report.found_at_5 == first.found_at_5 - 1
    assert report.warnings[0] == (
        "1 of 4 known answers no longer found: “what is mileage reimbursed at per kilometre”"
    )


def test_a_rebuild_that_finds_the_same_answers_warns_of_nothing(handbook, build):
    report = report_of(build(handbook))
    assert report.lost == [] and report.warnings == []


def test_an_older_build_is_not_measured_once_a_newer_one_is_live(handbook, build):
    first = handbook.runs.get()
    build(handbook)
    count = KnownAnswersReport.objects.count()
    assert k.measure_build(build_id=first.pk) is None
    assert KnownAnswersReport.objects.count() == count


def test_documents_held_back_for_review_are_not_searched_by_the_measurement(agent, knowledge_folder, build):
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    # Two paragraphs differing only in their numbers put both documents in review.
    knowledge_folder(
        "handbook",
        {
            **HANDBOOK,
            "old-travel.md": "# Travel\n\nMileage is reimbursed at 0.30 per "
            "kilometre.\n\nTrains are booked in standard class.\n",
        },
    )
    k.set_known_answers(collection=collection, items=ITEMS)
    report = report_of(build(collection))
    mileage = next(r for r in report.results if r["question"].startswith("what is mileage"))
    assert not mileage["found"] and mileage["score"] is None
    assert not found_by_search(collection, mileage["question"], mileage["answer"], min_score=0)


def test_a_measurement_that_cannot_embed_with_the_builds_model_is_a_failed_report(handbook, settings):
    settings.EMBED_BACKEND = "none"  # the server's embedder changed since the build
    report = k.measure_build(build_id=handbook.runs.get().pk)
    assert report.status == "failed" and "hash-64" in report.error
    assert report.found_at_5 is None


def test_setting_the_set_measures_the_live_build_at_once(
    agent, knowledge_folder, django_capture_on_commit_callbacks
):
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK)
    with django_capture_on_commit_callbacks(execute=True):
        run = build_collection(collection=collection)
    assert not KnownAnswersReport.objects.exists()  # no set, nothing measured
    with django_capture_on_commit_callbacks(execute=True):
        k.set_known_answers(collection=collection, items=ITEMS)
    assert report_of(run).answers == 4


def test_questions_and_markers_never_reach_a_log_line_or_the_ledger(
    handbook, knowledge_folder, build, caplog, settings
):
    caplog.set_level(logging.DEBUG)
    knowledge_folder("handbook", {"travel.md": "# Travel\n\nTrains are booked in standard class.\n"})
    build(handbook)
    settings.KNOWN_ANSWERS_GATE = 0
    knowledge_folder("handbook", {"security.md": "# Security\n\nBadges are worn at all times on site.\n"})
    assert build(handbook).status == BuildRun.REFUSED
    logged = caplog.text.lower()
    assert "known answers" in logged
    for item in ITEMS:
        assert item["question"].lower() not in logged
        assert item.get("answer", "§").lower() not in logged
    assert not ModelCall.objects.exists()


# --- The gate ----------------------------------------------------------------------------------


def test_the_gate_refuses_a_build_that_loses_answers_and_the_old_collection_keeps_answering(
    handbook, knowledge_folder, build, settings
):
    settings.KNOWN_ANSWERS_GATE = 0
    live = list(Paragraph.objects.filter(collection=handbook).order_by("ordinal").values_list("pk", "text"))
    built_at = handbook.built.built_at
    knowledge_folder("handbook", {"travel.md": "# Travel\n\nTrains are booked in standard class.\n"})
    run = build(handbook)
    assert run.status == BuildRun.REFUSED
    assert "loses 1 of 4 known answers" in run.error and "KNOWN_ANSWERS_GATE" in run.error
    # Nothing of the candidate was written: the same paragraphs, the same build record, still answering.
    assert (
        list(Paragraph.objects.filter(collection=handbook).order_by("ordinal").values_list("pk", "text"))
        == live
    )
    handbook.built.refresh_from_db()
    assert handbook.built.built_at == built_at
    assert found_by_search(handbook, "what is mileage reimbursed at per kilometre", "0.42 per kilometre")
    # The refused candidate's report says what it would have lost; it never counts as the live build's.
    refused = report_of(run)
    assert refused.lost == ["what is mileage reimbursed at per kilometre"]
    assert k.latest_report(handbook) == refused
    assert k.history(handbook)[-1].build_id == handbook.runs.order_by("id").first().pk


def test_the_gate_lets_through_a_build_within_its_allowance_with_the_warning(
    handbook, knowledge_folder, build, settings
):
    settings.KNOWN_ANSWERS_GATE = 1
    knowledge_folder("handbook", {"travel.md": "# Travel\n\nTrains are booked in standard class.\n"})
    run = build(handbook)
    assert run.status == BuildRun.SUCCEEDED
    assert report_of(run).lost == ["what is mileage reimbursed at per kilometre"]
    assert not found_by_search(handbook, "what is mileage reimbursed at per kilometre", "0.42 per kilometre")


def test_the_gates_measurement_of_the_candidate_equals_the_measurement_after_commit(
    handbook, knowledge_folder, build, settings
):
    settings.KNOWN_ANSWERS_GATE = 0
    # A changed document, an unchanged one reused, one in review: the candidate is assembled from all three.
    knowledge_folder(
        "handbook",
        {
            "leave.md": HANDBOOK["leave.md"] + "\nParental leave is sixteen weeks.\n",
            "draft.md": "# Draft\n\nMileage is reimbursed at 0.40 per kilometre on trains.\n",
        },
    )
    run = build(handbook)
    assert run.status == BuildRun.SUCCEEDED and run.documents_reused == 2
    gated = report_of(run)
    fields = [
        "found_at_1",
        "found_at_5",
        "floor",
        "lowest_answer",
        "highest_control",
        "separates",
        "measured_floor",
        "results",
        "lost",
    ]
    before = {f: getattr(gated, f) for f in fields}
    after = k.measure_build(build_id=run.pk)
    assert {f: getattr(after, f) for f in fields} == before


def test_without_known_answers_the_gate_lets_every_build_through(agent, knowledge_folder, build, settings):
    settings.KNOWN_ANSWERS_GATE = 0
    collection = create_collection(agent=agent, name="handbook")
    knowledge_folder("handbook", HANDBOOK)
    assert build(collection).status == BuildRun.SUCCEEDED


# --- The measured floor -------------------------------------------------------------------------


def test_a_measured_floor_is_in_force_once_measured_and_every_answer_says_its_source(handbook, build):
    ask = {"agent": handbook.agent, "collection": handbook, "question": "annual leave"}
    assert search_collection(**ask)["floor_source"] == "default"
    Collection.objects.filter(pk=handbook.pk).update(min_score=0.1)
    handbook.refresh_from_db()
    assert (search_collection(**ask)["floor"], search_collection(**ask)["floor_source"]) == (
        0.1,
        "collection",
    )
    KnownAnswersReport.objects.all().delete()
    k.set_known_answers(collection=handbook, items=ITEMS, floor_measured=True)
    # Until a build is measured, the collection's own floor still applies.
    assert search_collection(**ask)["floor_source"] == "collection"
    report = report_of(build(handbook))
    answer = search_collection(**ask)
    assert (answer["floor"], answer["floor_source"]) == (report.measured_floor, "measured")
    assert (report.floor, report.floor_source) == (report.measured_floor, "measured")
    assert search_collection(**ask, min_score=0.5)["floor_source"] == "request"


def test_a_per_reader_collection_answers_at_its_configured_floor_never_a_measured_one(
    handbook, build, settings
):
    """Issue 24, item 6: a floor measured over every paragraph moves with paragraphs a reader may not read,
    so on a per-reader collection it is not used (and staff cannot ask for it), for every reader alike."""
    from collections_app.models import Reader
    from collections_app.services.readers.labels import set_per_reader

    k.set_known_answers(collection=handbook, items=ITEMS, floor_measured=True)
    report = report_of(build(handbook))
    everyone = search_collection(agent=handbook.agent, collection=handbook, question="annual leave")
    assert everyone["floor_source"] == "measured" and report.measured_floor is not None
    set_per_reader(collection=handbook, per_reader=True)
    handbook.refresh_from_db()
    Reader.objects.create(external_id="alice")
    answer = search_collection(
        agent=handbook.agent, collection=handbook, question="annual leave", reader="alice"
    )
    assert (answer["floor"], answer["floor_source"]) == (float(settings.MIN_SCORE), "default")
    with pytest.raises(RagsiteError) as refused:
        k.set_known_answers(collection=handbook, items=ITEMS, floor_measured=True)
    assert refused.value.code == "per_reader_floor"
    assert any("configured floor applies" in w for w in report_of(build(handbook)).warnings)


def test_a_measured_floor_that_cannot_separate_warns_that_controls_come_back(agent, knowledge_folder, build):
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK)
    # A control on the documents' own subject, worded like an answered question, scores like an answer.
    k.set_known_answers(
        collection=collection,
        floor_measured=True,
        items=[*ANSWERS, {"question": "must laptops use full disk encryption on holiday", "control": True}],
    )
    report = report_of(build(collection))
    assert report.separates is False
    assert any("do not separate" in w and "controls will get paragraphs back" in w for w in report.warnings)


def test_the_measured_floor_keeps_at_least_95_percent_of_the_sample_handbooks_answers(
    agent, monkeypatch, build
):
    """With the hash embedder: of the answers found unfloored, the search at the measured floor
    keeps ≥ 95 %."""
    monkeypatch.setenv("KNOWLEDGE_ALPHA__HANDBOOK_FOLDER", str(SAMPLE_DOCS))
    collection = create_collection(agent=agent, name="handbook")
    items = k.parse_jsonl(k.SAMPLE_SET.read_bytes())
    k.set_known_answers(collection=collection, items=items, floor_measured=True)
    report = report_of(build(collection))
    reachable = [r for r in report.results if not r["control"] and r["score"] is not None]
    kept = [r for r in reachable if found_by_search(collection, r["question"], r["answer"])]
    assert len(kept) >= 0.95 * len(reachable) and report.floor_source == "measured"


@pytest.mark.model
def test_with_the_real_model_the_measured_floor_keeps_95_percent_of_every_sample_answer(
    agent, monkeypatch, build
):
    monkeypatch.setenv("KNOWLEDGE_ALPHA__HANDBOOK_FOLDER", str(SAMPLE_DOCS))
    collection = create_collection(agent=agent, name="handbook")
    items = k.parse_jsonl(k.SAMPLE_SET.read_bytes())
    answers = [i for i in items if "answer" in i]
    k.set_known_answers(collection=collection, items=items, floor_measured=True)
    report = report_of(build(collection))
    kept = [i for i in answers if found_by_search(collection, i["question"], i["answer"])]
    assert report.floor_source == "measured" and len(kept) >= 0.95 * len(answers)
    assert report.found_at_5 == len(kept)
