"""MCP: a build's outcome (`build_status`), the caller's collections (`collections`), and recall's
vocabulary."""

from datetime import timedelta

import pytest
from django.utils import timezone

from collections_app.models import BuildRun
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection, request_build
from collections_app.services.builds.status import build_status

from .test_mcp import call_tool, tool_error

pytestmark = pytest.mark.django_db

DOCS = {
    "leave.md": "# Leave\n\nCarry-over of annual leave is capped at five days a year.\n",
    "bad.pdf": b"nope",
}


@pytest.fixture
def keyed(db):
    return create_agent(agent_id="alpha", name="Alpha")


@pytest.fixture
def policies(keyed, knowledge_root):
    agent, _raw = keyed
    knowledge_root("alpha", "policies", DOCS)
    return create_collection(agent=agent, name="policies", folder="policies", method="fixed")


def test_build_status_answers_the_latest_build_with_every_field_the_api_has(client, keyed, policies):
    _agent, raw = keyed
    run = build_collection(collection=policies)
    result = call_tool(client, raw, "build_status", {"collection": "policies"})
    answer = result["structuredContent"]
    assert result["isError"] is False
    assert answer == build_status(run=BuildRun.objects.get(pk=run.pk))
    assert answer["status"] == "succeeded" and answer["passages"] >= 1 and answer["refused"] == ["bad.pdf"]
    assert answer["model"] == "hash-64" and answer["problems"] == [] and answer["error"] is None
    by_id = call_tool(client, raw, "build_status", {"collection": "policies", "build": run.pk})[
        "structuredContent"
    ]
    assert by_id["build"] == run.pk
    api = client.get(
        f"/api/v1/collections/policies/builds/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {raw}"
    ).json()
    assert api == by_id  # one service, one answer


def test_build_status_refuses_unknown_builds_never_built_collections_and_long_waits(client, keyed, policies):
    _agent, raw = keyed
    assert (
        tool_error(call_tool(client, raw, "build_status", {"collection": "policies"}))["code"]
        == "never_built"
    )
    other, _ = create_agent(agent_id="other")
    theirs = create_collection(agent=other, name="theirs")
    assert (
        tool_error(call_tool(client, raw, "build_status", {"collection": "theirs"}))["code"]
        == "unknown_collection"
    )
    run = build_collection(collection=policies)
    assert theirs.pk and run.pk
    missing = call_tool(client, raw, "build_status", {"collection": "policies", "build": run.pk + 100})
    assert tool_error(missing)["code"] == "unknown_build"
    too_long = call_tool(client, raw, "build_status", {"collection": "policies", "wait_seconds": 61})
    assert tool_error(too_long)["code"] == "invalid_arguments"


def test_waiting_for_a_build_nobody_runs_answers_after_the_wait_saying_no_worker_runs(
    client, keyed, policies, settings
):
    _agent, raw = keyed
    settings.BUILD_STALE_SECONDS = 60
    run = request_build(collection=policies, enqueue=False)
    BuildRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(seconds=90))
    started = timezone.now()
    answer = call_tool(client, raw, "build_status", {"collection": "policies", "wait_seconds": 1})[
        "structuredContent"
    ]
    assert (timezone.now() - started).total_seconds() >= 1
    assert answer["status"] == "queued" and answer["refused"] is None
    assert answer["waiting"].startswith("no task worker is running")


def test_collections_lists_the_callers_collections_with_their_last_build(client, keyed, policies):
    agent, raw = keyed
    create_collection(agent=agent, name="empty")
    other, _ = create_agent(agent_id="other")
    create_collection(agent=other, name="theirs")
    build_collection(collection=policies)
    second = build_collection(collection=policies)
    listed = call_tool(client, raw, "collections", {})["structuredContent"]["collections"]
    assert [c["name"] for c in listed] == ["empty", "policies"]
    assert listed[0]["last_build"] is None
    assert listed[1]["folder"] == "policies" and listed[1]["last_build"]["build"] == second.pk
    assert listed[1]["last_build"]["documents_reused"] == 1
    assert (
        tool_error(call_tool(client, raw, "collections", {"agent": "other"}))["code"] == "invalid_arguments"
    )


def test_recall_takes_question_and_still_accepts_query(client, keyed):
    _agent, raw = keyed
    call_tool(client, raw, "store", {"text": "The staging database password rotates every Monday."})
    call_tool(client, raw, "store", {"text": "Deployed the search service on Tuesday.", "kind": "ep"})
    asked = "when does the staging password rotate"
    for arguments in ({"question": asked, "most": 1}, {"query": asked, "most": 1}):
        excerpts = call_tool(client, raw, "recall", arguments)["structuredContent"]["excerpts"]
        assert len(excerpts) == 1 and "rotates every Monday" in excerpts[0]["text"]
    for arguments in ({}, {"question": "a", "query": "b"}):
        assert tool_error(call_tool(client, raw, "recall", arguments))["code"] == "invalid_arguments"


def test_a_builds_status_carries_its_known_answers_report_over_api_and_mcp(
    client, keyed, policies, django_capture_on_commit_callbacks
):
    from collections_app.services.known_answers import set_known_answers

    _agent, raw = keyed
    set_known_answers(
        collection=policies,
        items=[
            {"question": "how many days of leave carry over", "answer": "capped at five days"},
            {"question": "what is the capital of france", "control": True},
        ],
        floor_measured=False,
    )
    with django_capture_on_commit_callbacks(execute=True):  # the measurement is a task queued on commit
        run = build_collection(collection=policies)
    status = call_tool(client, raw, "build_status", {"collection": "policies"})["structuredContent"]
    report = status["known_answers"]
    assert report["build"] == run.pk and report["answers"] == 1 and report["controls"] == 1
    assert report["found_at_5"] == 1 and "results" not in report
    api = client.get(
        f"/api/v1/collections/policies/builds/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {raw}"
    ).json()
    assert api == status
