"""The MCP endpoint at /mcp: the protocol with Django's test client, then the official Python and
TypeScript SDK clients against a live server."""

import json
import logging
import os
import shutil
import subprocess
from pathlib import Path

import jsonschema
import pytest

from collections_app.models import BuildRun, ModelCall, Paragraph
from collections_app.services.agents import create_agent, create_collection, revoke_key
from collections_app.services.builds import build_collection
from collections_app.services.ledger import record_call
from collections_app.services.search import search_collection
from ragsite.mcp import protocol, registry, transport
from tests.conftest import HANDBOOK

HERE = Path(__file__).resolve().parent
QUESTION = "how many days of annual leave carry over"
ANSWER = "capped at five days"
LATEST = protocol.LATEST_VERSION


@pytest.fixture
def keyed(db):
    """An agent and its raw key."""
    return create_agent(agent_id="alpha", name="Alpha")


@pytest.fixture
def handbook(keyed, knowledge_folder):
    agent, _raw = keyed
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK)
    assert build_collection(collection=collection).status == "succeeded"
    return collection


def send(client, raw, body, *, version=LATEST, raw_body=None, **headers):
    """POST one JSON-RPC payload (or raw bytes) to /mcp with the key and a protocol version header."""
    if raw is not None:
        headers.setdefault("Authorization", f"Bearer {raw}")
    if version is not None:
        headers.setdefault("MCP-Protocol-Version", version)
    headers.setdefault("Accept", "application/json, text/event-stream")
    data = raw_body if raw_body is not None else json.dumps(body)
    content_type = headers.pop("content_type", "application/json")
    return client.post("/mcp", data=data, content_type=content_type, headers=headers)


def call(client, raw, method, params=None, *, id_=1, **kwargs):
    message = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return send(client, raw, message, **kwargs)


def call_tool(client, raw, name, arguments, **kwargs):
    response = call(client, raw, "tools/call", {"name": name, "arguments": arguments}, **kwargs)
    assert response.status_code == 200, response.content
    return response.json()["result"]


def tool_error(result) -> dict:
    """The error of a failed tool call, checked to be the same in the text and the structured content."""
    assert result["isError"] is True
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    error = result["structuredContent"]["error"]
    assert set(error) == {"code", "message"}
    return error


# --- The handshake and the listing --------------------------------------------------------


@pytest.mark.parametrize("version", protocol.PROTOCOL_VERSIONS)
def test_initialize_answers_the_clients_version_when_supported(client, keyed, version):
    _agent, raw = keyed
    response = call(client, raw, "initialize", {
        "protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"},
    }, version=None)
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "Mcp-Session-Id" not in response  # stateless: no session to hand out
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == 1
    result = body["result"]
    assert result["protocolVersion"] == version
    assert result["serverInfo"]["name"] == "ragsite"
    assert result["capabilities"] == {"tools": {"listChanged": False}}


@pytest.mark.parametrize("offered", ["2024-11-05", "2099-01-01", "banana"])
def test_initialize_answers_the_latest_version_when_the_clients_is_not_supported(client, keyed, offered):
    _agent, raw = keyed
    result = call(client, raw, "initialize", {"protocolVersion": offered, "capabilities": {},
                                              "clientInfo": {"name": "t", "version": "1"}}).json()["result"]
    assert result["protocolVersion"] == LATEST


def test_initialize_without_a_protocol_version_is_invalid_params(client, keyed):
    _agent, raw = keyed
    body = call(client, raw, "initialize", {"capabilities": {}}).json()
    assert body["error"]["code"] == -32602 and body["id"] == 1


def test_ping_answers_an_empty_result(client, keyed):
    _agent, raw = keyed
    assert call(client, raw, "ping", id_="p-1").json() == {"jsonrpc": "2.0", "id": "p-1", "result": {}}


def test_tools_list_names_every_tool_with_its_schemas(client, keyed):
    _agent, raw = keyed
    tools = {t["name"]: t for t in call(client, raw, "tools/list").json()["result"]["tools"]}
    assert {"search", "build", "store", "recall"} <= set(tools)
    search = tools["search"]
    assert search["title"] and search["description"]
    schema = search["inputSchema"]
    assert schema["required"] == ["collection", "question"] and schema["additionalProperties"] is False
    assert schema["properties"]["question"]["maxLength"] == 2000
    assert (schema["properties"]["most"]["minimum"], schema["properties"]["most"]["maximum"]) == (1, 50)
    assert (schema["properties"]["around"]["minimum"], schema["properties"]["around"]["maximum"]) == (0, 5)
    assert (schema["properties"]["min_score"]["minimum"], schema["properties"]["min_score"]["maximum"]) == (0, 1)
    assert search["outputSchema"]["type"] == "object"
    assert search["annotations"]["readOnlyHint"] is True


def test_at_2025_03_26_tools_carry_no_output_schema_and_results_no_structured_content(client, handbook, keyed):
    # Structured output arrived in 2025-06-18; an older client gets the JSON as text only.
    _agent, raw = keyed
    tools = call(client, raw, "tools/list", version="2025-03-26").json()["result"]["tools"]
    assert all("outputSchema" not in t and "title" not in t for t in tools)
    result = call_tool(client, raw, "search", {"collection": "handbook", "question": QUESTION}, version=None)
    assert "structuredContent" not in result and result["isError"] is False
    assert ANSWER in json.loads(result["content"][0]["text"])["paragraphs"][0]["text"]


def test_a_cursor_this_server_never_issued_is_invalid_params(client, keyed):
    _agent, raw = keyed
    assert call(client, raw, "tools/list", {"cursor": "abc"}).json()["error"]["code"] == -32602


# --- Tools --------------------------------------------------------------------------------


def test_search_finds_the_paragraph_and_answers_like_the_service(client, handbook, keyed):
    agent, raw = keyed
    result = call_tool(client, raw, "search", {"collection": "handbook", "question": QUESTION, "around": 0})
    assert result["isError"] is False
    answer = result["structuredContent"]
    assert ANSWER in answer["paragraphs"][0]["text"] and answer["paragraphs"][0]["document"] == "leave.md"
    assert json.loads(result["content"][0]["text"]) == answer
    assert answer == search_collection(agent=agent, collection="handbook", question=QUESTION, around=0)
    # Seed 004: the agent's citation is the chunk_id export writes in docs.jsonl.
    matched = Paragraph.objects.get(collection=handbook, text__contains=ANSWER)
    assert answer["paragraphs"][0]["chunk_id"] == f"leave.md#{matched.index}"


def test_search_passes_every_argument_through(client, handbook, keyed):
    _agent, raw = keyed
    answer = call_tool(client, raw, "search", {
        "collection": "handbook", "question": "badges quantum", "most": 1, "around": 2, "min_score": 0,
        "reader": None, "onBehalfOf": None,
    })["structuredContent"]
    assert len(answer["paragraphs"]) == 1 and answer["floor"] == 0 and answer["around"] == 2


def test_an_unknown_or_another_agents_collection_is_a_tool_error(client, handbook, keyed):
    _agent, raw = keyed
    other, _ = create_agent(agent_id="beta")
    create_collection(agent=other, name="theirs")
    missing = tool_error(call_tool(client, raw, "search", {"collection": "nothing", "question": QUESTION}))
    theirs = tool_error(call_tool(client, raw, "search", {"collection": "theirs", "question": QUESTION}))
    assert missing["code"] == theirs["code"] == "unknown_collection"


def test_a_per_reader_collection_without_a_reader_is_a_tool_error(client, keyed, knowledge_folder):
    agent, raw = keyed
    collection = create_collection(agent=agent, name="secret", method="fixed", size=80, per_reader=True)
    knowledge_folder("secret", HANDBOOK)
    build_collection(collection=collection)
    error = tool_error(call_tool(client, raw, "search", {"collection": "secret", "question": QUESTION}))
    assert error["code"] == "reader_required" and "reader" in error["message"]
    # An unknown reader reads what a reader holding no labels reads (here: everything unlabelled).
    answer = call_tool(client, raw, "search", {"collection": "secret", "question": QUESTION, "reader": "mallory"})
    assert answer["isError"] is False and answer["structuredContent"]["paragraphs"]


def test_over_the_runaway_limit_is_a_tool_error(client, handbook, keyed):
    agent, raw = keyed
    agent.runaway_limit = 1
    agent.save()
    record_call(agent=agent, collection=handbook, purpose=ModelCall.JUDGE, model="judge-mini")
    error = tool_error(call_tool(client, raw, "search", {"collection": "handbook", "question": QUESTION,
                                                         "onBehalfOf": "alpha"}))
    assert error["code"] == "runaway_limit"


def test_a_never_built_collection_is_a_tool_error(client, keyed):
    agent, raw = keyed
    create_collection(agent=agent, name="empty")
    assert tool_error(call_tool(client, raw, "search", {"collection": "empty", "question": "q"}))["code"] == "not_built"


BAD_ARGUMENTS = [
    ({"collection": "handbook"}, "missing required argument(s) 'question'"),
    ({"collection": "handbook", "question": QUESTION, "top_k": 3}, "unknown argument(s) 'top_k'"),
    ({"collection": "handbook", "question": ""}, "'question' must be at least 1"),
    ({"collection": "handbook", "question": "x" * 2001}, "'question' must be at most 2000"),
    ({"collection": "handbook", "question": 42}, "'question' must be string"),
    ({"collection": "handbook", "question": QUESTION, "most": 0}, "'most' must be at least 1"),
    ({"collection": "handbook", "question": QUESTION, "most": 51}, "'most' must be at most 50"),
    ({"collection": "handbook", "question": QUESTION, "most": "5"}, "'most' must be integer"),
    ({"collection": "handbook", "question": QUESTION, "most": True}, "'most' must be integer"),
    ({"collection": "handbook", "question": QUESTION, "most": 2.5}, "'most' must be integer"),
    ({"collection": "handbook", "question": QUESTION, "around": 6}, "'around' must be at most 5"),
    ({"collection": "handbook", "question": QUESTION, "around": -1}, "'around' must be at least 0"),
    ({"collection": "handbook", "question": QUESTION, "min_score": 1.5}, "'min_score' must be at most 1"),
    ({"collection": "handbook", "question": QUESTION, "min_score": "high"}, "'min_score' must be number or null"),
    ({"collection": "handbook", "question": QUESTION, "reader": 7}, "'reader' must be string or null"),
    ({"collection": "", "question": QUESTION}, "'collection' must be at least 1"),
    ({"collection": ["handbook"], "question": QUESTION}, "'collection' must be string"),
]


@pytest.mark.parametrize(("arguments", "message"), BAD_ARGUMENTS)
def test_arguments_outside_the_schema_are_a_tool_error_naming_the_problem(client, handbook, keyed, arguments, message):
    _agent, raw = keyed
    error = tool_error(call_tool(client, raw, "search", arguments))
    assert error["code"] == "invalid_arguments" and message in error["message"]


def test_whole_floats_count_as_integers_like_json_schema_says(client, handbook, keyed):
    _agent, raw = keyed
    result = call_tool(client, raw, "search", {"collection": "handbook", "question": QUESTION, "most": 1.0})
    assert result["isError"] is False and len(result["structuredContent"]["paragraphs"]) == 1


@pytest.mark.parametrize(("params", "fragment"), [
    ({"arguments": {}}, "needs the tool's name"),
    ({"name": 5}, "needs the tool's name"),
    ({"name": "delete_everything", "arguments": {}}, "unknown tool 'delete_everything'"),
    ({"name": "search", "arguments": ["handbook", QUESTION]}, "arguments must be an object"),
    ({"name": "search", "arguments": "handbook"}, "arguments must be an object"),
])
def test_malformed_tools_call_params_are_invalid_params(client, keyed, params, fragment):
    _agent, raw = keyed
    body = call(client, raw, "tools/call", params).json()
    assert body["error"]["code"] == -32602 and fragment in body["error"]["message"]


def test_build_queues_a_build_and_a_second_one_is_refused_while_it_waits(client, handbook, keyed):
    _agent, raw = keyed
    # The test transaction never commits, so the queued build is not run: it stays queued.
    first = call_tool(client, raw, "build", {"collection": "handbook"})
    assert first["isError"] is False
    run = BuildRun.objects.get(pk=first["structuredContent"]["build"])
    assert first["structuredContent"] == {"build": run.pk, "status": "queued"} and run.requested_by == "mcp"
    assert tool_error(call_tool(client, raw, "build", {"collection": "handbook"}))["code"] == "build_running"
    assert tool_error(call_tool(client, raw, "build", {"collection": "nope"}))["code"] == "unknown_collection"


def test_store_then_recall_finds_the_memory(client, keyed):
    _agent, raw = keyed
    stored = call_tool(client, raw, "store", {"text": "The staging database password rotates every Monday."})
    assert stored["isError"] is False
    assert stored["structuredContent"]["kind"] == "mem" and stored["structuredContent"]["id"] > 0
    episode = call_tool(client, raw, "store", {"text": "Deployed the search service on Tuesday.", "kind": "ep"})
    assert episode["structuredContent"]["kind"] == "ep"
    recalled = call_tool(client, raw, "recall", {"question": "when does the staging password rotate", "most": 1})
    records = recalled["structuredContent"]["records"]
    assert len(records) == 1 and records[0]["id"] == stored["structuredContent"]["id"]
    assert "rotates every Monday" in records[0]["excerpt"]["text"]


def test_memory_tool_errors_are_tool_results(client, keyed):
    _agent, raw = keyed
    assert tool_error(call_tool(client, raw, "store", {"text": "   "}))["code"] == "empty_text"
    assert tool_error(call_tool(client, raw, "store", {"text": "x", "kind": "note"}))["code"] == "invalid_arguments"
    assert tool_error(call_tool(client, raw, "recall", {"query": "q", "most": 99}))["code"] == "invalid_arguments"


def test_answers_match_the_published_output_schemas(client, handbook, keyed):
    """Checked with the independent `jsonschema` package, for successes and for errors alike."""
    _agent, raw = keyed
    schemas = {t["name"]: t["outputSchema"] for t in call(client, raw, "tools/list").json()["result"]["tools"]}
    calls = [
        ("search", {"collection": "handbook", "question": QUESTION}),
        ("search", {"collection": "missing", "question": QUESTION}),
        ("search", {"collection": "handbook", "question": QUESTION, "most": 0}),
        ("build", {"collection": "missing"}),
        ("store", {"text": "a short memory about badges"}),
        ("recall", {"query": "badges"}),
        ("recall", {"question": "badges"}),
        ("build_status", {"collection": "handbook"}),
        ("build_status", {"collection": "handbook", "build": 999}),
        ("collections", {}),
    ]
    for name, arguments in calls:
        result = call_tool(client, raw, name, arguments)
        jsonschema.validate(result["structuredContent"], schemas[name])


# --- The schemas and their checker ---------------------------------------------------------


def _keywords(schema):
    for key, value in schema.items():
        if key == "properties":
            for sub in value.values():
                yield from _keywords(sub)
        else:
            yield key


@pytest.mark.parametrize("name", sorted(registry.TOOLS))
def test_input_schemas_use_only_keywords_the_checker_enforces(name):
    schema = registry.TOOLS[name].input_schema
    jsonschema.Draft202012Validator.check_schema(schema)
    assert set(_keywords(schema)) <= registry.SCHEMA_KEYWORDS
    assert schema["type"] == "object" and schema["additionalProperties"] is False


@pytest.mark.parametrize("name", sorted(registry.TOOLS))
def test_output_schemas_are_valid_json_schema(name):
    output = registry.TOOLS[name].output_schema
    jsonschema.Draft202012Validator.check_schema(registry.or_error(output))
    jsonschema.validate({"error": {"code": "x", "message": "y"}}, registry.or_error(output))


SAMPLES = [
    {"collection": "c", "question": "q"},
    {"collection": "c", "question": "q", "most": 50, "around": 0, "min_score": 0.0},
    {"collection": "c", "question": "q", "most": 51},
    {"collection": "c", "question": "q", "most": 3.0},
    {"collection": "c", "question": "q", "most": None},
    {"collection": "c", "question": "q", "around": None, "reader": None, "onBehalfOf": None, "min_score": None},
    {"collection": "c", "question": "q", "min_score": 1},
    {"collection": "c", "question": "q", "min_score": True},
    {"collection": "c", "question": "q", "reader": ""},
    {"collection": "c", "question": "q", "onBehalfOf": "x" * 101},
    {"collection": "c", "question": "q", "extra": 1},
    {"collection": "c"},
    {"question": "q"},
    {},
    {"collection": "c" * 100, "question": "q" * 2000},
    {"collection": "c" * 101, "question": "q"},
    {"collection": {}, "question": "q"},
]


@pytest.mark.parametrize("arguments", SAMPLES)
def test_the_checker_agrees_with_an_independent_json_schema_validator(arguments):
    schema = registry.TOOLS["search"].input_schema
    independent = jsonschema.Draft202012Validator(schema).is_valid(arguments)
    try:
        registry.check_arguments(schema, arguments)
        ours = True
    except registry.InvalidArguments:
        ours = False
    assert ours == independent


# --- The transport ------------------------------------------------------------------------


def test_no_key_a_wrong_key_or_a_revoked_key_is_401_in_the_error_shape(client, keyed):
    agent, raw = keyed
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    for key in (None, raw + "x", ""):
        response = send(client, key, ping)
        assert response.status_code == 401 and response["WWW-Authenticate"] == "Bearer"
        assert set(response.json()) == {"error"} and response.json()["error"]["code"] == "unauthorized"
    assert send(client, None, ping, Authorization=f"Basic {raw}").status_code == 401
    assert send(client, raw, ping).status_code == 200
    revoke_key(key=agent.keys.get())
    assert send(client, raw, ping).status_code == 401


@pytest.mark.parametrize("body", [b"{not json", b"   ", b"\xff\xfe{}", b'{"jsonrpc": "2.0", "id": NaN, "method": "ping"}',
                                  b"[" * 100_000 + b"]" * 100_000])
def test_a_body_that_is_not_json_is_a_parse_error(client, keyed, body):
    _agent, raw = keyed
    response = send(client, raw, None, raw_body=body)
    assert response.status_code == 400
    assert response.json() == {"jsonrpc": "2.0", "id": None,
                               "error": {"code": -32700, "message": response.json()["error"]["message"]}}


@pytest.mark.parametrize("message", [
    5, "ping", None, {"id": 1, "method": "ping"}, {"jsonrpc": "1.0", "id": 1, "method": "ping"},
    {"jsonrpc": "2.0", "id": 1}, {"jsonrpc": "2.0", "id": 1, "method": 7},
    {"jsonrpc": "2.0", "id": None, "method": "ping"}, {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
    {"jsonrpc": "2.0", "id": True, "method": "ping"}, {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"},
])
def test_an_invalid_request_is_32600(client, keyed, message):
    _agent, raw = keyed
    response = send(client, raw, message)
    assert response.status_code == 400 and response.json()["error"]["code"] == -32600


def test_array_params_are_invalid_params(client, keyed):
    _agent, raw = keyed
    assert call(client, raw, "ping", [1]).json()["error"]["code"] == -32602


@pytest.mark.parametrize("method", ["resources/list", "prompts/list", "server/discover", "tools/delete", ""])
def test_an_unknown_method_is_32601(client, keyed, method):
    _agent, raw = keyed
    response = call(client, raw, method, {}, id_=9)
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32601 and response.json()["id"] == 9


@pytest.mark.parametrize("message", [
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
    {"jsonrpc": "2.0", "method": "notifications/never-heard-of"},
    {"jsonrpc": "2.0", "method": "tools/call", "params": "not even an object"},
    {"jsonrpc": "2.0", "id": 3, "result": {}},
    {"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "no"}},
])
def test_notifications_and_responses_are_accepted_with_202_and_no_body(client, keyed, message):
    _agent, raw = keyed
    response = send(client, raw, message)
    assert response.status_code == 202 and response.content == b""


@pytest.mark.parametrize("method", ["get", "delete", "put", "patch", "options"])
def test_anything_but_post_is_405(client, keyed, method):
    _agent, raw = keyed
    response = getattr(client, method)("/mcp", headers={"Authorization": f"Bearer {raw}",
                                                        "Accept": "text/event-stream"})
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_a_body_over_one_mebibyte_is_413(client, keyed):
    _agent, raw = keyed
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                      "params": {"name": "store", "arguments": {"text": "x" * (1024 * 1024)}}})
    response = send(client, raw, None, raw_body=big)
    assert response.status_code == 413 and response.json()["error"]["code"] == "too_large"


def test_a_body_that_is_not_declared_json_is_415_and_a_client_refusing_json_406(client, keyed):
    _agent, raw = keyed
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert send(client, raw, None, raw_body=ping, content_type="text/plain").status_code == 415
    assert send(client, raw, None, raw_body=ping, Accept="text/event-stream").status_code == 406
    assert send(client, raw, None, raw_body=ping, Accept="text/event-stream, */*;q=0.1").status_code == 200
    assert send(client, raw, None, raw_body=ping, content_type="application/json; charset=utf-8").status_code == 200


@pytest.mark.parametrize(("origin", "status"), [
    ("http://localhost:6274", 200), ("http://127.0.0.1", 200), ("http://[::1]:8080", 200),
    ("https://ragsite.example", 200), ("https://evil.example", 403), ("null", 403),
    ("file://", 403), ("http://localhost.evil.example", 403),
])
def test_an_origin_must_be_local_or_an_allowed_host(client, keyed, settings, origin, status):
    _agent, raw = keyed
    settings.ALLOWED_HOSTS = ["testserver", "ragsite.example", "*"]  # a bare "*" admits no browser origin
    response = call(client, raw, "ping", Origin=origin)
    assert response.status_code == status
    if status == 403:
        assert response.json()["error"]["code"] == "forbidden_origin"


def test_no_csrf_token_is_needed(keyed):
    from django.test import Client

    _agent, raw = keyed
    assert call(Client(enforce_csrf_checks=True), raw, "ping").status_code == 200


def test_an_unsupported_protocol_version_header_is_400(client, keyed):
    _agent, raw = keyed
    response = call(client, raw, "ping", version="2024-11-05")
    assert response.status_code == 400 and response.json()["error"]["code"] == -32600
    assert "2025-06-18" in response.json()["error"]["message"]
    # initialize negotiates in its body, whatever header came with it
    response = call(client, raw, "initialize", {"protocolVersion": "2025-06-18"}, version="2024-11-05")
    assert response.json()["result"]["protocolVersion"] == "2025-06-18"


def test_a_batch_is_answered_at_2025_03_26(client, keyed):
    _agent, raw = keyed
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": "two", "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "nope"},
        {"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {"protocolVersion": "2025-03-26"}},
        17,
    ]
    for version in (None, "2025-03-26"):
        response = send(client, raw, batch, version=version)
        assert response.status_code == 200
        replies = response.json()
        assert [r["id"] for r in replies] == [1, "two", 3, 4, None]
        assert replies[0]["result"] == {} and replies[1]["result"]["tools"]
        assert [r["error"]["code"] for r in replies[2:]] == [-32601, -32600, -32600]


def test_a_batch_of_notifications_is_202_and_an_empty_or_huge_batch_400(client, keyed):
    _agent, raw = keyed
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert send(client, raw, [note, note], version=None).status_code == 202
    assert send(client, raw, [], version=None).status_code == 400
    assert send(client, raw, [note] * (transport.MAX_BATCH + 1), version=None).status_code == 400


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
def test_a_batch_is_refused_clearly_from_2025_06_18(client, keyed, version):
    _agent, raw = keyed
    response = send(client, raw, [{"jsonrpc": "2.0", "id": 1, "method": "ping"}], version=version)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32600 and "batches" in response.json()["error"]["message"]


def test_an_unexpected_failure_is_an_internal_error_not_a_500(client, keyed, monkeypatch, caplog):
    _agent, raw = keyed

    def broken(caller, arguments):
        raise ZeroDivisionError("SECRET-ARGUMENT")

    monkeypatch.setitem(registry.TOOLS, "broken", registry.Tool(
        name="broken", title="Broken", description="fails", handler=broken,
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
    ))
    with caplog.at_level(logging.ERROR, logger="ragsite.mcp"):
        response = call(client, raw, "tools/call", {"name": "broken", "arguments": {}})
    assert response.status_code == 200 and response.json()["error"]["code"] == -32603
    assert "SECRET-ARGUMENT" not in response.content.decode()


def test_no_question_reaches_the_log(client, handbook, keyed, caplog):
    _agent, raw = keyed
    with caplog.at_level(logging.DEBUG):
        call_tool(client, raw, "search", {"collection": "handbook", "question": "SECRET-QUESTION leave"})
        call_tool(client, raw, "search", {"collection": "missing", "question": "SECRET-QUESTION leave"})
    assert "SECRET-QUESTION" not in caplog.text


# --- The official SDK clients against a live server -------------------------------------------


@pytest.fixture
def live_handbook(live_server, knowledge_folder, transactional_db):
    """A built collection, committed so the live server's thread sees it; answers (url, key)."""
    agent, raw = create_agent(agent_id="live", name="Live")
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK)
    assert build_collection(collection=collection).status == "succeeded"
    return f"{live_server.url}/mcp", raw


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_official_python_client_searches_a_live_server(live_handbook):
    import anyio
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    url, raw = live_handbook

    async def session_run():
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {raw}"}, timeout=30) as http,
            streamable_http_client(url, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            initialized = await session.initialize()
            tools = await session.list_tools()
            found = await session.call_tool("search", {"collection": "handbook", "question": QUESTION, "around": 0})
            missing = await session.call_tool("search", {"collection": "nope", "question": QUESTION})
            wrong = await session.call_tool("search", {"collection": "handbook", "question": QUESTION, "most": 99})
            return initialized, tools, found, missing, wrong

    initialized, tools, found, missing, wrong = anyio.run(session_run)
    assert initialized.server_info.name == "ragsite"
    assert initialized.protocol_version in protocol.PROTOCOL_VERSIONS
    assert {"search", "build"} <= {tool.name for tool in tools.tools}
    assert found.is_error is False
    best = found.structured_content["paragraphs"][0]
    assert ANSWER in best["text"] and best["document"] == "leave.md"
    assert json.loads(found.content[0].text) == found.structured_content
    assert missing.is_error is True and missing.structured_content["error"]["code"] == "unknown_collection"
    assert wrong.is_error is True and wrong.structured_content["error"]["code"] == "invalid_arguments"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_python_sdks_default_client_falls_back_from_discover_to_initialize(live_handbook):
    # `mcp.Client` probes the stateless 2026 era (`server/discover`) first; this server answers that
    # with a 400, and the client falls back to the initialize handshake.
    import anyio
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    url, raw = live_handbook

    async def client_run():
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {raw}"}, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            found = await client.call_tool("search", {"collection": "handbook", "question": QUESTION})
            return client.protocol_version, found

    version, found = anyio.run(client_run)
    assert version in protocol.PROTOCOL_VERSIONS
    assert found.is_error is False and ANSWER in found.structured_content["paragraphs"][0]["text"]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_official_python_client_is_refused_without_a_key(live_server, transactional_db):
    import anyio
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    async def session_run():
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            streamable_http_client(f"{live_server.url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            try:
                await session.initialize()
            except MCPError as refused:
                return refused
        return None

    refused = anyio.run(session_run)
    assert isinstance(refused, MCPError)


NODE_MODULES = HERE / "node_modules" / "@modelcontextprotocol" / "sdk"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.skipif(not NODE_MODULES.is_dir(),
                    reason="the TypeScript MCP SDK is not installed: npm ci --prefix tests/collections")
def test_the_official_typescript_client_searches_a_live_server(live_handbook):
    url, raw = live_handbook
    env = {**os.environ, "MCP_URL": url, "MCP_KEY": raw,
           "MCP_ARGUMENTS": json.dumps({"collection": "handbook", "question": QUESTION, "around": 0})}
    done = subprocess.run(["node", str(HERE / "mcp_client.mjs")], env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["server"]["name"] == "ragsite" and out["sessionId"] is None
    assert out["protocolVersion"] in protocol.PROTOCOL_VERSIONS
    assert out["capabilities"]["tools"] == {"listChanged": False}
    assert {"search", "build"} <= {tool["name"] for tool in out["tools"]}
    search = out["search"]
    assert search["isError"] is False
    assert ANSWER in search["structuredContent"]["paragraphs"][0]["text"]
    # The client validates an error's structuredContent against the outputSchema too: it must pass.
    assert out["missing"]["isError"] is True
    assert out["missing"]["structuredContent"]["error"]["code"] == "unknown_collection"
