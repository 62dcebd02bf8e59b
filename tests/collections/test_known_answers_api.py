"""Known answers (issue 17) through the API and the command, and the demo's sample set."""

# ruff: noqa: F811  (the fixtures `build` and `handbook` come from test_known_answers, requested by name)

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from collections_app.models import BuildRun, Collection, KnownAnswer, KnownAnswersReport, ModelCall
from collections_app.services import known_answers as k
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from tests.conftest import HANDBOOK, SAMPLE_DOCS

from .test_known_answers import ITEMS, build, handbook  # noqa: F401

pytestmark = pytest.mark.django_db


# --- The API and the command ---------------------------------------------------------------------


def request(client, method, raw, path, payload=None):
    body = json.dumps(payload) if payload is not None else None
    return getattr(client, method)(
        path, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}"
    )


@pytest.fixture
def keyed(agent_key, knowledge_folder, build):
    agent, raw = agent_key
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK, agent="keyed")
    build(collection)
    return collection, raw


def test_the_api_puts_and_gets_known_answers(client, keyed, django_capture_on_commit_callbacks):
    collection, raw = keyed
    path = "/api/v1/collections/handbook/known-answers"
    assert request(client, "get", raw, path).json() == {
        "collection": "handbook",
        "questions": [],
        "floor_measured": False,
        "report": None,
    }
    with django_capture_on_commit_callbacks(execute=True):
        put = request(client, "put", raw, path, {"questions": ITEMS, "floor_measured": True})
    assert (
        put.status_code == 200 and put.json()["questions"] == ITEMS and put.json()["floor_measured"] is True
    )
    got = request(client, "get", raw, path).json()
    report = got["report"]
    assert report["build"] == collection.runs.get().pk and report["answers"] == 4
    assert report["floor_source"] == "measured" and len(report["results"]) == 5
    # Nothing the service answers is left out by the API's declaration (collections_app.schemas).
    served = k.describe(collection)
    assert set(served) <= set(got) and set(served["report"]) <= set(report)
    assert {k for r in served["report"]["results"] for k in r} <= {k for r in report["results"] for k in r}
    search = request(
        client, "post", raw, "/api/v1/collections/handbook/search", {"question": "annual leave"}
    ).json()
    assert (search["floor"], search["floor_source"]) == (report["measured_floor"], "measured")


def test_putting_the_same_set_again_queues_no_second_measurement(
    client, keyed, django_capture_on_commit_callbacks, monkeypatch
):
    collection, raw = keyed
    path = "/api/v1/collections/handbook/known-answers"
    with django_capture_on_commit_callbacks(execute=True):
        assert request(client, "put", raw, path, {"questions": ITEMS}).status_code == 200
    report = collection.known_answer_reports.get()
    queued = []
    monkeypatch.setattr("collections_app.services.known_answers.the_set._enqueue", queued.append)
    for _ in range(3):
        with django_capture_on_commit_callbacks(execute=True):
            assert request(client, "put", raw, path, {"questions": ITEMS}).status_code == 200
    assert queued == [] and list(collection.known_answer_reports.all()) == [report]
    # A failed measurement is retried by the same PUT; a changed set is measured again.
    KnownAnswersReport.objects.filter(pk=report.pk).update(status=KnownAnswersReport.FAILED)
    with django_capture_on_commit_callbacks(execute=True):
        request(client, "put", raw, path, {"questions": ITEMS})
    with django_capture_on_commit_callbacks(execute=True):
        request(client, "put", raw, path, {"questions": ITEMS[:-1]})
    assert queued == [report.build_id, report.build_id]


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"questions": [{"question": "q"}]}, "item 1 needs either"),
        ({"questions": [{"question": f"q{i}", "answer": "a"} for i in range(201)]}, "at most 200"),
        ({"questions": "q | a"}, "questions"),
        ({}, "questions"),
    ],
)
def test_the_api_refuses_a_bad_set_with_the_error_shape(client, keyed, payload, message):
    _collection, raw = keyed
    response = request(client, "put", raw, "/api/v1/collections/handbook/known-answers", payload)
    assert response.status_code == 400
    error = response.json()["error"]
    assert set(error) == {"code", "message"} and message in error["message"]
    assert not KnownAnswer.objects.exists()


def test_the_api_refuses_a_per_reader_collection_and_another_agents(client, keyed, knowledge_folder):
    collection, raw = keyed
    Collection.objects.filter(pk=collection.pk).update(per_reader=True)
    response = request(client, "put", raw, "/api/v1/collections/handbook/known-answers", {"questions": ITEMS})
    assert response.status_code == 409 and response.json()["error"]["code"] == "per_reader"
    other, _raw = create_agent(agent_id="other")
    create_collection(agent=other, name="theirs")
    response = request(client, "get", raw, "/api/v1/collections/theirs/known-answers")
    assert response.status_code == 404


def test_the_command_sets_shows_and_clears_known_answers(keyed, tmp_path, django_capture_on_commit_callbacks):
    collection, _raw = keyed
    path = tmp_path / "known.jsonl"
    path.write_text("\n".join(json.dumps(item) for item in ITEMS))
    out = StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("known_answers", "keyed", "handbook", str(path), "--measured-floor", stdout=out)
    assert "4 known answers and 1 controls; floor measured: True" in out.getvalue()
    shown = StringIO()
    call_command("known_answers", "keyed", "handbook", stdout=shown)
    assert "found" in shown.getvalue() and "(measured)" in shown.getvalue()
    as_json = StringIO()
    call_command("known_answers", "keyed", "handbook", "--json", stdout=as_json)
    assert json.loads(as_json.getvalue())["questions"] == ITEMS
    call_command("known_answers", "keyed", "handbook", "--clear", stdout=StringIO())
    assert not KnownAnswer.objects.filter(collection=collection).exists()


def test_the_command_refuses_bad_files_naming_the_line(keyed, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q", "answer": "a"}\nnot json\n')
    with pytest.raises(CommandError, match="line 2 is not JSON"):
        call_command("known_answers", "keyed", "handbook", str(bad))
    with pytest.raises(CommandError, match="cannot read"):
        call_command("known_answers", "keyed", "handbook", str(Path(tmp_path) / "missing.jsonl"))


# --- The demo -------------------------------------------------------------------------------


def test_the_demo_ships_a_known_answer_set_and_reads_the_handbooks_floor_off_it(
    monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setenv("KNOWLEDGE_HANDBOOK_FOLDER", str(SAMPLE_DOCS))
    with django_capture_on_commit_callbacks(execute=True):
        call_command("demo", stdout=StringIO(), stderr=StringIO())
    handbook = Collection.objects.get(name="handbook")
    assert handbook.floor_measured and KnownAnswer.objects.filter(collection=handbook).count() >= 30
    report = k.latest_report(handbook)
    assert report.status == "measured" and report.found_at_5 and report.floor_source == "measured"


def test_the_sample_set_never_replaces_a_set_a_person_made(agent):
    collection = create_collection(agent=agent, name="handbook")
    k.set_known_answers(collection=collection, items=ITEMS)
    assert k.give_sample_set(collection=collection) is None
    assert k.as_items(k.known_answers(collection)) == ITEMS


def test_a_builds_status_can_carry_its_own_report(handbook, knowledge_folder, build):
    knowledge_folder("handbook", {"travel.md": "# Travel\n\nTrains are booked in standard class.\n"})
    run = build(handbook)
    status = k.for_build(run)
    assert status["build"] == run.pk and status["lost"] == ["what is mileage reimbursed at per kilometre"]
    assert "results" not in status and status["warnings"][0].startswith(
        "1 of 4 known answers no longer found"
    )
    assert k.for_build(BuildRun.objects.create(collection=handbook)) is None


def test_measuring_with_an_embedding_endpoint_charges_its_tokens_to_the_collections_agent(
    agent, knowledge_folder, embedding_server, django_capture_on_commit_callbacks
):
    """The questions are embedded by the endpoint to be measured: that call is in the ledger like any
    other, charged to the collection's agent with the endpoint's token count, and says nothing of them."""
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK)
    with django_capture_on_commit_callbacks(execute=True):
        build_collection(collection=collection)
    before = set(ModelCall.objects.values_list("pk", flat=True))
    with django_capture_on_commit_callbacks(execute=True):
        k.set_known_answers(collection=collection, items=ITEMS)
    assert KnownAnswersReport.objects.get().answers == 4
    (call,) = ModelCall.objects.exclude(pk__in=before)
    assert (call.agent, call.collection, call.purpose) == (agent, collection, ModelCall.EMBED)
    assert call.model == "house-model"
    assert call.tokens_in == sum(len(item["question"].split()) + 2 for item in ITEMS)
