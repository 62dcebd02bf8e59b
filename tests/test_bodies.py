"""Every body is bounded and every input answered: 413 in the JSON shape on every route, 400 for
nesting, lone surrogates, NaN and wrong types, JSON 404 for unknown API routes (POST included),
never a 500 and never HTML under /api/ or on the embedding endpoints. docs/decisions/0021."""

import json

import pytest

from collections_app.models import ModelCall
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection

pytestmark = pytest.mark.django_db

SURFACES = {
    "search": ("post", "/api/v1/collections/handbook/search"),
    "store": ("post", "/api/v1/memory/memories"),
    "recall": ("post", "/api/v1/memory/recall"),
    "replace": ("put", "/api/v1/memory/records/mem/1"),
    "unknown": ("post", "/api/v1/nonexistent/route"),
    "embeddings": ("post", "/v1/embeddings"),
    "tokenize": ("post", "/v1/tokenize"),
    "count_tokens": ("post", "/count_tokens"),
    "mcp": ("post", "/mcp"),
}


@pytest.fixture
def raw(knowledge_folder):
    agent, raw = create_agent(agent_id="hostile")
    knowledge_folder("handbook", {"a.md": "# A\n\nCarry-over is capped at five days."}, agent="hostile")
    build_collection(collection=create_collection(agent=agent, name="handbook"))
    return raw


def send(client, raw, surface, body: bytes | str):
    method, path = SURFACES[surface]
    return getattr(client, method)(
        path,
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
        HTTP_ACCEPT="application/json",
    )


def _json_error(response) -> dict:
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    return body.get("error") or body  # MCP answers JSON-RPC


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("megabytes", [3, 10])
def test_a_body_over_the_limit_is_413_json_on_every_route(client, raw, surface, megabytes):
    body = json.dumps({"text": "x" * (megabytes * 1024 * 1024), "question": "q", "input": "x"})
    response = send(client, raw, surface, body)
    if surface in ("embeddings", "tokenize", "count_tokens") and megabytes == 3:
        # Under those endpoints' own 4 MiB: answered, within their per-text caps.
        assert response.status_code in (200, 400) and response.json()
    elif surface == "unknown":  # no route reads it: the JSON 404
        assert response.status_code == 404 and _json_error(response)
    else:
        assert response.status_code == 413, (surface, response.status_code, response.content[:200])
        assert _json_error(response)


HOSTILE = {
    "nested": "[" * 100_000 + "]" * 100_000,
    "nested_object": '{"a":' * 50_000 + "1" + "}" * 50_000,
    "lone_surrogate": (
        '{"question": "x\\udfffy", "text": "x\\udfffy", "query": "x\\udfffy", "input": "x\\udfffy"}'
    ),
    "nan": '{"question": "q", "min_score": NaN, "text": "t", "query": "q", "input": "t", "most": Infinity}',
    "not_json": "{'question': 'single quotes'}",
    "not_utf8": b'{"question": "\xff\xfe"}',
}


@pytest.mark.parametrize("surface", SURFACES)
@pytest.mark.parametrize("kind", HOSTILE)
def test_hostile_json_is_a_clear_4xx_never_a_500_or_html(client, raw, surface, kind):
    response = send(client, raw, surface, HOSTILE[kind])
    assert 400 <= response.status_code < 500, (surface, kind, response.status_code, response.content[:300])
    assert _json_error(response)


@pytest.mark.parametrize(
    "field,value",
    [
        ("min_score", True),
        ("min_score", False),
        ("min_score", "0.5"),
        ("around", "1"),
        ("around", True),
        ("around", 1.0),
        ("most", "5"),
        ("most", 2.0),
        ("most", True),
    ],
)
def test_search_types_are_strict(client, raw, field, value):
    response = send(client, raw, "search", json.dumps({"question": "carry-over", field: value}))
    assert response.status_code == 400 and response.json()["error"]["code"] == "invalid_request"


@pytest.mark.parametrize("method", ["post", "put", "delete", "patch", "get"])
def test_unknown_api_routes_are_json_404_for_every_method(client, raw, method):
    response = client.generic(
        method.upper(),
        "/api/v1/collections/alpha%2F../search",
        "{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("where", ["path", "reader", "onBehalfOf"])
def test_a_nul_anywhere_is_never_a_500(client, raw, where):
    path = (
        "/api/v1/collections/hand%00book/search" if where == "path" else "/api/v1/collections/handbook/search"
    )
    body = {"question": "carry-over"}
    if where != "path":
        body[where] = "hostile\u0000x"
    response = client.post(
        path, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}"
    )
    assert response.status_code in (200, 403, 404), response.content


def test_the_embedding_endpoint_caps_inputs_and_characters(client, raw, settings):
    settings.EMBED_SERVER_MAX_INPUTS, settings.EMBED_SERVER_MAX_CHARS = 4, 100
    assert send(client, raw, "embeddings", json.dumps({"input": ["a"] * 4})).status_code == 200
    too_many = send(client, raw, "embeddings", json.dumps({"input": ["a"] * 5}))
    too_long = send(client, raw, "embeddings", json.dumps({"input": ["a" * 101]}))
    long_count = send(client, raw, "count_tokens", json.dumps({"text": "a" * 101}))
    assert [r.status_code for r in (too_many, too_long, long_count)] == [400, 400, 400]
    assert "at most 4 texts" in too_many.json()["error"]["message"]


def test_embedding_calls_are_charged_and_share_the_runaway_limit(client, raw, knowledge_folder):
    from collections_app.models import Agent

    Agent.objects.filter(agent_id="hostile").update(runaway_limit=3)
    answers = [
        send(client, raw, "embeddings", json.dumps({"input": f"text {i}"})).status_code for i in range(5)
    ]
    assert answers == [200, 200, 200, 429, 429]
    assert ModelCall.objects.filter(agent__agent_id="hostile", purpose="embed").count() == 3
    refused = send(client, raw, "embeddings", json.dumps({"input": "again"}))
    assert refused.json()["error"]["code"] == "runaway_limit" and int(refused["Retry-After"]) >= 1


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_a_method_a_route_does_not_take_is_json_405(client, raw, method):
    response = client.generic(
        method,
        "/api/v1/collections/handbook/search",
        "{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert response.status_code == 405 and response.json()["error"]["code"] == "method_not_allowed"
    assert "POST" in response["Allow"]


NUL_FIELDS = {
    "built_from": ("post", "/api/v1/collections", {"name": "zz-bf", "built_from": "the HR\u0000share"}),
    "known answer": (
        "put",
        "/api/v1/collections/handbook/known-answers",
        {"questions": [{"question": "carry\u0000over", "answer": "five days"}]},
    ),
    "known answer marker": (
        "put",
        "/api/v1/collections/handbook/known-answers",
        {"questions": [{"question": "carry-over", "answer": "five\u0000days"}]},
    ),
    "memory": ("post", "/api/v1/memory/memories", {"text": "badge\u0000office"}),
    "episode": ("post", "/api/v1/memory/episodes", {"text": "badge\u0000office"}),
}


@pytest.mark.parametrize("field", NUL_FIELDS)
def test_a_nul_in_any_stored_text_field_is_refused_with_the_one_error_shape(client, raw, field):
    """Issue 24, item 10: PostgreSQL cannot store U+0000, so it was a 500 there and stored on SQLite."""
    method, path, body = NUL_FIELDS[field]
    response = getattr(client, method)(
        path, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}"
    )
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert response.json() == {"error": {"code": "invalid_text", "message": error["message"]}}
    assert "NUL" in response.json()["error"]["message"]


def test_a_nul_in_a_measure_question_is_a_tool_error_not_a_500(client, raw):
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "measure",
            "arguments": {
                "collection": "handbook",
                "questions": [{"question": "carry\u0000over", "answer": "five days"}],
            },
        },
    }
    response = client.post(
        "/mcp",
        json.dumps(call),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
        HTTP_ACCEPT="application/json",
    )
    result = response.json()["result"]
    assert response.status_code == 200 and result["isError"] is True
    assert json.loads(result["content"][0]["text"])["error"]["code"] == "invalid_text"
