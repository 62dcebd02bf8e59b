"""The memory API at /api/v1/memory, through Django's test client with a Bearer key."""

import pytest

from collections_app.services.agents import create_agent
from memory_app.models import MAX_TEXT_LENGTH, Memory, RecordNode
from memory_app.schemas import RecallOut
from tests.declared import assert_declared, every_key

from .conftest import WINDOW, prose

pytestmark = pytest.mark.django_db

BASE = "/api/v1/memory"


@pytest.fixture
def api(client, django_capture_on_commit_callbacks):
    """`api(method, path, body=None, key=...)` as the agent "keyed"; queued tasks run on commit."""
    agent, raw = create_agent(agent_id="keyed")

    def call(method, path, body=None, key=raw):
        headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
        with django_capture_on_commit_callbacks(execute=True):
            if method in ("get", "delete"):
                return getattr(client, method)(BASE + path, **headers)
            return getattr(client, method)(BASE + path, body, content_type="application/json", **headers)

    call.agent = agent
    return call


def error_code(response):
    body = response.json()
    assert set(body) == {"error"} and set(body["error"]) == {"code", "message"}
    return body["error"]["code"]


def test_storing_a_short_memory_answers_201_without_nodes(api):
    response = api("post", "/memories", {"text": "The spare key is under the blue pot."})
    assert response.status_code == 201
    body = response.json()
    assert body == {"id": body["id"], "kind": "mem", "text_length": 36}


def test_storing_a_long_episode_answers_queued_and_its_nodes_can_be_read(api):
    text = prose(200, seed=3)
    response = api("post", "/episodes", {"text": text})
    assert response.status_code == 201
    body = response.json()
    assert body["kind"] == "ep" and body["text_length"] == len(text) and body["nodes"] == {"status": "queued"}
    node = api("get", f"/nodes/ep/{body['id']}/1")
    assert node.status_code == 200
    node = node.json()
    assert node["text"] == text[node["start"] : node["end"]]
    assert node["token_count"] <= node["window"] == WINDOW and node["node_index"] == 1


def test_recall_answers_excerpts_within_its_budget(api):
    long_text = prose(200, seed=1)
    long_id = api("post", "/memories", {"text": long_text}).json()["id"]
    short_id = api("post", "/memories", {"text": "river stone lantern by the harbor"}).json()["id"]
    response = api(
        "post", "/recall", {"query": "river stone lantern harbor", "most": 5, "max_chars": 100_000}
    )
    assert response.status_code == 200
    body = response.json()
    assert_declared(body, RecallOut)
    assert set(body) == every_key(RecallOut)
    assert body["rerank"] == {"status": "not configured"}
    excerpts = body["excerpts"]
    assert {(e["kind"], e["id"]) for e in excerpts} == {("mem", long_id), ("mem", short_id)}
    (short,) = [e for e in excerpts if e["id"] == short_id]
    assert short == {
        "kind": "mem",
        "id": short_id,
        "score": short["score"],
        "text": "river stone lantern by the harbor",
        "start": 0,
        "end": 33,
        "nodes": None,
        "record_length": 33,
        "cut": False,
        "superseded_by": None,
    }
    for excerpt in excerpts:
        if excerpt["id"] == long_id:
            assert excerpt["text"] == long_text[excerpt["start"] : excerpt["end"]]
            assert 0 <= excerpt["nodes"]["first"] <= excerpt["nodes"]["last"]
    assert all(0 <= e["score"] <= 1 for e in excerpts)
    assert [e["score"] for e in excerpts] == sorted((e["score"] for e in excerpts), reverse=True)
    assert body["chars"] == sum(len(e["text"]) for e in excerpts) and body["max_chars"] == 100_000
    small = api("post", "/recall", {"query": "river stone lantern harbor", "max_chars": 120}).json()
    assert small["chars"] <= 120 and small["max_chars"] == 120 and small["cut"] is True
    assert api("post", "/recall", {"query": "river", "most": 1}).json()["excerpts"][0]["id"] in (
        long_id,
        short_id,
    )


@pytest.mark.parametrize(
    ("path", "body", "code"),
    [
        ("/memories", {"text": "x" * (MAX_TEXT_LENGTH + 1)}, "text_too_long"),
        ("/episodes", {"text": "x" * (MAX_TEXT_LENGTH + 1)}, "text_too_long"),
        ("/memories", {"text": ""}, "empty_text"),
        ("/memories", {}, "invalid_request"),
        ("/memories", {"text": 5}, "invalid_request"),
        ("/recall", {"query": ""}, "invalid_request"),
        ("/recall", {"query": "q" * 2001}, "invalid_request"),
        ("/recall", {"query": "fine", "most": 0}, "invalid_request"),
        ("/recall", {"query": "fine", "most": 51}, "invalid_request"),
        ("/recall", {"query": "fine", "max_chars": 0}, "invalid_request"),
        ("/recall", {"query": "fine", "max_chars": 100_001}, "invalid_request"),
        ("/recall", {"query": "fine", "max_chars": "9"}, "invalid_request"),
    ],
)
def test_bad_input_is_400_in_the_one_error_shape(api, path, body, code):
    response = api("post", path, body)
    assert response.status_code == 400
    assert error_code(response) == code
    assert Memory.objects.count() == 0


def test_the_limits_themselves_are_accepted(api):
    assert api("post", "/memories", {"text": "x" * MAX_TEXT_LENGTH}).status_code == 201
    assert api("post", "/recall", {"query": "q" * 2000, "most": 50, "max_chars": 100_000}).status_code == 200
    assert api("post", "/recall", {"query": "q", "max_chars": 1}).status_code == 200


def test_a_malformed_body_is_400(api, client):
    response = client.post(
        BASE + "/memories",
        "{not json",
        content_type="application/json",
        HTTP_AUTHORIZATION="Bearer " + create_agent(agent_id="other")[1],
    )
    assert response.status_code == 400 and error_code(response) == "malformed_json"


def test_another_agents_node_answers_404_exactly_like_a_missing_one(api):
    _them, their_key = create_agent(agent_id="them")
    theirs = api("post", "/memories", {"text": prose(200)}, key=their_key).json()["id"]
    assert RecordNode.objects.filter(parent_id=theirs).exists()
    on_theirs = api("get", f"/nodes/mem/{theirs}/0")
    on_missing = api("get", f"/nodes/mem/{theirs + 100}/0")
    assert on_theirs.status_code == on_missing.status_code == 404
    assert error_code(on_theirs) == error_code(on_missing) == "unknown_record"
    assert api("post", "/recall", {"query": "river stone"}).json()["excerpts"] == []
    assert api("get", "/health").json()["records"] == 0


def test_a_missing_node_of_an_own_record_is_404_and_a_bad_kind_is_400(api):
    own = api("post", "/memories", {"text": "short"}).json()["id"]
    missing = api("get", f"/nodes/mem/{own}/0")
    assert missing.status_code == 404 and error_code(missing) == "unknown_node"
    bad_kind = api("get", f"/nodes/note/{own}/0")
    assert bad_kind.status_code == 400 and error_code(bad_kind) == "invalid_request"


def test_health_reports_and_repairs_the_callers_records(api, monkeypatch):
    # Store with the queue "down": the on-commit enqueue fails, the store still answers.
    def broker_down(*args, **kwargs):
        raise ConnectionError("broker unreachable")

    with monkeypatch.context() as patched:
        patched.setattr("django_q.tasks.async_task", broker_down)
        stored = api("post", "/memories", {"text": prose(200)})
    assert stored.status_code == 201 and stored.json()["nodes"] == {"status": "queued"}
    report = api("get", "/health").json()
    assert report["missing_nodes"] == 1 and report["missing"][0]["id"] == stored.json()["id"]
    repaired = api("get", "/health?repair=true&limit=1").json()
    assert [item["status"] for item in repaired["repaired"]] == ["built"] and repaired["remaining"] == 0
    assert api("get", "/health?limit=51").status_code == 400


def test_every_route_needs_a_key(client):
    for method, path in [
        ("post", "/memories"),
        ("post", "/episodes"),
        ("post", "/recall"),
        ("get", "/nodes/mem/1/0"),
        ("get", "/health"),
    ]:
        response = getattr(client, method)(BASE + path)
        assert response.status_code == 401, path
        assert error_code(response) == "unauthorized"


def test_the_routes_are_in_the_openapi_document(client):
    paths = client.get("/api/v1/openapi.json").json()["paths"]
    for path in ("/memories", "/episodes", "/recall", "/nodes/{kind}/{id}/{index}", "/health"):
        assert BASE + path in paths


def test_replacing_a_records_text_requeues_its_nodes_and_deleting_removes_them(api):
    record_id = api("post", "/memories", {"text": prose(200, seed=5)}).json()["id"]
    assert RecordNode.objects.filter(parent_kind="mem", parent_id=record_id).exists()
    response = api("put", f"/records/mem/{record_id}", {"text": prose(220, seed=6)})
    assert response.status_code == 200 and response.json()["nodes"] == {"status": "queued"}
    nodes = RecordNode.objects.filter(parent_kind="mem", parent_id=record_id)
    text = Memory.objects.get(pk=record_id).text
    assert nodes.exists() and all(text[n.start_char : n.end_char] for n in nodes)
    assert max(n.end_char for n in nodes) == len(text)
    assert api("delete", f"/records/mem/{record_id}").status_code == 204
    assert not Memory.objects.filter(pk=record_id).exists()
    assert not RecordNode.objects.filter(parent_kind="mem", parent_id=record_id).exists()


def test_another_agents_record_cannot_be_replaced_or_deleted(api):
    record_id = api("post", "/memories", {"text": "mine alone"}).json()["id"]
    other = create_agent(agent_id="other")[1]
    assert (
        error_code(api("put", f"/records/mem/{record_id}", {"text": "theirs"}, key=other)) == "unknown_record"
    )
    assert api("delete", f"/records/mem/{record_id}", key=other).status_code == 404
    assert Memory.objects.get(pk=record_id).text == "mine alone"
