"""Agent keys on the JSON API, and the one error shape."""

import json

import pytest

from collections_app.services.agents import create_agent, create_collection, revoke_key

pytestmark = pytest.mark.django_db


def bearer(raw):
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def test_no_key_is_401_in_the_error_shape(client):
    response = client.get("/api/v1/collections/")
    assert response.status_code == 401
    assert response.json() == {
        "error": {"code": "unauthorized", "message": response.json()["error"]["message"]}
    }
    assert response["WWW-Authenticate"] == "Bearer"


def test_a_wrong_or_revoked_key_is_401(client):
    agent, raw = create_agent(agent_id="a1")
    assert client.get("/api/v1/collections/", **bearer(raw + "x")).status_code == 401
    revoke_key(key=agent.keys.get())
    assert client.get("/api/v1/collections/", **bearer(raw)).status_code == 401


def test_an_agent_sees_only_its_own_collections(client):
    a1, raw1 = create_agent(agent_id="a1")
    a2, _raw2 = create_agent(agent_id="a2")
    create_collection(agent=a1, name="mine")
    create_collection(agent=a2, name="theirs")
    listed = client.get("/api/v1/collections/", **bearer(raw1)).json()
    assert [c["name"] for c in listed] == ["mine"]
    assert listed[0]["built"] is None  # never built is its own answer


def test_another_agents_collection_answers_exactly_like_a_missing_one(client):
    a1, raw1 = create_agent(agent_id="a1")
    a2, _ = create_agent(agent_id="a2")
    create_collection(agent=a2, name="theirs")
    theirs = client.get("/api/v1/collections/theirs", **bearer(raw1))
    missing = client.get("/api/v1/collections/nothing-here", **bearer(raw1))
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["error"]["code"] == missing.json()["error"]["code"] == "unknown_collection"


def test_an_unknown_route_answers_in_the_error_shape(client):
    _agent, raw = create_agent(agent_id="a1")
    response = client.get("/api/v1/no/such/thing", **bearer(raw))
    assert response.status_code == 404
    assert set(response.json()["error"]) == {"code", "message"}


def test_openapi_schema_is_served(client):
    schema = client.get("/api/v1/openapi.json")
    assert schema.status_code == 200
    assert "/api/v1/collections" in json.loads(schema.content)["paths"]


def test_the_api_docs_page_is_served_without_a_key(client):
    page = client.get("/api/v1/docs")
    assert page.status_code == 200 and b"openapi.json" in page.content


def test_a_key_is_looked_up_once_per_request_and_still_each_request(client):
    """On PostgreSQL the middleware (AgentScope) checks the key before the view does: one lookup
    serves both. A key revoked between two requests is refused by the second."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    agent, raw = create_agent(agent_id="a1")
    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/v1/collections/", **bearer(raw)).status_code == 200
    lookups = [
        q["sql"] for q in queries if "apikey" in q["sql"].lower() and q["sql"].lstrip().startswith("SELECT")
    ]
    assert len(lookups) == 1, lookups
    revoke_key(key=agent.keys.get())
    assert client.get("/api/v1/collections/", **bearer(raw)).status_code == 401


def test_a_request_memo_answers_only_for_its_own_token(rf):
    from collections_app.services.agents import request_key

    agent, raw = create_agent(agent_id="a1")
    request = rf.get("/api/v1/collections/")
    assert request_key(request, raw).agent == agent
    assert request_key(request, raw + "x") is None  # another token: looked up afresh, not the memo's key
    assert request_key(rf.get("/"), raw).agent == agent
