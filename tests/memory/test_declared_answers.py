"""Memory's answers are what memory_app/schemas.py declares, on real calls: the service, the API and
the MCP tools alike. A field the service adds and the declaration lacks (which the API would drop)
fails here, as does a declared field the service never sets."""

import pytest

from collections_app.services.agents import create_agent
from memory_app import services
from memory_app.schemas import ExcerptOut, HealthOut, ListOut, RecallOut, RecordOut, StoredOut
from ragsite.mcp import Caller, registry
from ragsite.model_calls.rerank import RerankOut
from tests.declared import assert_declared, every_key, required_keys
from tests.servers import RerankServer, serving

from .conftest import prose

pytestmark = pytest.mark.django_db

BASE = "/api/v1/memory"
QUESTION = "river stone lantern harbor"


@pytest.fixture
def keyed(db):
    return create_agent(agent_id="keyed")


@pytest.fixture
def api(client, keyed, django_capture_on_commit_callbacks):
    _agent, raw = keyed

    def call(method, path, body=None):
        headers = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
        with django_capture_on_commit_callbacks(execute=True):
            if method == "get":
                return client.get(BASE + path, **headers)
            return getattr(client, method)(BASE + path, body, content_type="application/json", **headers)

    return call


def tool(name, keyed, **arguments):
    agent, _raw = keyed
    return registry.TOOLS[name].handler(Caller(agent=agent, key=None), arguments)


@pytest.fixture
def records(api):
    long = api("post", "/memories", {"text": prose(200, seed=1)})
    short = api("post", "/episodes", {"text": "river stone lantern by the harbor"})
    assert long.status_code == short.status_code == 201
    return long.json(), short.json()


def check_recall(answer: dict, reranked: bool) -> None:
    assert_declared(answer, RecallOut)
    assert set(answer) == every_key(RecallOut)
    assert answer["excerpts"]
    for excerpt in answer["excerpts"]:
        assert set(excerpt) == every_key(ExcerptOut)
    assert set(answer["rerank"]) == (every_key(RerankOut) if reranked else required_keys(RerankOut))


def test_recall_answers_exactly_the_declared_fields_from_service_api_and_tool(api, keyed, records):
    agent, _raw = keyed
    served = services.recall(agent=agent, query=QUESTION)
    check_recall(served, reranked=False)
    response = api("post", "/recall", {"question": QUESTION})
    assert response.status_code == 200
    assert response.json() == served  # nothing the service answers is dropped or added on the way
    assert tool("recall", keyed, question=QUESTION) == served


def test_a_reranked_recall_answers_every_declared_field(api, keyed, records, settings):
    with serving(RerankServer(favourite="harbor")) as server:
        settings.RERANK_URL, settings.RERANK_MODEL = server.url + "/v1/rerank", "rerank-mini"
        settings.RERANK_TIMEOUT = 2.0
        response = api("post", "/recall", {"question": QUESTION})
    assert response.status_code == 200
    answer = response.json()
    assert answer["rerank"]["status"] == "reranked"
    check_recall(answer, reranked=True)


def test_stored_listed_read_and_health_answers_are_declared(api, keyed, records):
    long, short = records
    assert set(long) == every_key(StoredOut) and set(short) == required_keys(StoredOut)  # nodes: long only
    stored = tool("store", keyed, text="a short one", kind="ep")
    for answer in (*records, stored):
        assert_declared(answer, StoredOut)
    assert set(stored) == set(short)
    listed = api("get", "/memories").json()
    assert_declared(listed, ListOut)
    assert tool("list_records", keyed)["records"][0].keys() == listed["records"][0].keys()
    read = api("get", f"/records/mem/{long['id']}").json()
    assert_declared(read, RecordOut)
    assert_declared(tool("read_record", keyed, kind="mem", id=long["id"]), RecordOut)
    health = api("get", "/health").json()
    assert_declared(health, HealthOut)
    assert set(health) == required_keys(HealthOut)
    repaired = api("get", "/health?repair=true").json()
    assert_declared(repaired, HealthOut)
    assert set(repaired) == required_keys(HealthOut) | {"vectors", "repaired", "remaining"}
