"""The MCP endpoint at /mcp with Django's test client: the handshake, the tools and their schemas.

test_mcp_transport.py holds the transport and the official SDK clients."""

import json
from pathlib import Path

import jsonschema
import pytest

from collections_app.models import BuildRun, ModelCall, Paragraph
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from collections_app.services.ledger import record_call
from collections_app.services.search import search_collection
from ragsite.mcp import protocol, registry
from tests.conftest import HANDBOOK
from tests.declared import closed

HERE = Path(__file__).resolve().parent
QUESTION = "how many days of annual leave carry over"
ANSWER = "capped at five days"
LATEST = protocol.LATEST_LEGACY  # the handshake era's newest; test_mcp_modern.py speaks 2026-07-28


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


@pytest.mark.parametrize("version", protocol.LEGACY_VERSIONS)
def test_initialize_answers_the_clients_version_when_supported(client, keyed, version):
    _agent, raw = keyed
    response = call(
        client,
        raw,
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
        version=None,
    )
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert "Mcp-Session-Id" not in response  # stateless: no session to hand out
    body = response.json()
    assert body["jsonrpc"] == "2.0" and body["id"] == 1
    result = body["result"]
    assert result["protocolVersion"] == version
    assert result["serverInfo"]["name"] == "ragsite"
    # Tools, and the paragraphs a search links to (resources/read); neither list changes while it runs.
    assert result["capabilities"] == {
        "tools": {"listChanged": False},
        "resources": {"subscribe": False, "listChanged": False},
    }


@pytest.mark.parametrize("offered", ["2024-11-05", "2099-01-01", "banana", "2026-07-28"])
def test_initialize_answers_the_latest_version_when_the_clients_is_not_supported(client, keyed, offered):
    # 2026-07-28 has no handshake: a client that initializes is answered in the handshake era.
    _agent, raw = keyed
    result = call(
        client,
        raw,
        "initialize",
        {"protocolVersion": offered, "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    ).json()["result"]
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
    assert (schema["properties"]["min_score"]["minimum"], schema["properties"]["min_score"]["maximum"]) == (
        0,
        1,
    )
    assert search["outputSchema"]["type"] == "object"
    assert search["annotations"]["readOnlyHint"] is True


def test_at_2025_03_26_tools_carry_no_output_schema_and_results_no_structured_content(
    client, handbook, keyed
):
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
    answer = call_tool(
        client,
        raw,
        "search",
        {
            "collection": "handbook",
            "question": "badges quantum",
            "most": 1,
            "around": 2,
            "min_score": 0,
            "reader": None,
            "onBehalfOf": None,
        },
    )["structuredContent"]
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
    answer = call_tool(
        client, raw, "search", {"collection": "secret", "question": QUESTION, "reader": "mallory"}
    )
    assert answer["isError"] is False and answer["structuredContent"]["paragraphs"]


def test_over_the_runaway_limit_is_a_tool_error(client, handbook, keyed):
    agent, raw = keyed
    agent.runaway_limit = 1
    agent.save()
    record_call(agent=agent, collection=handbook, purpose=ModelCall.JUDGE, model="judge-mini")
    error = tool_error(
        call_tool(
            client, raw, "search", {"collection": "handbook", "question": QUESTION, "onBehalfOf": "alpha"}
        )
    )
    assert error["code"] == "runaway_limit"


def test_a_never_built_collection_is_a_tool_error(client, keyed):
    agent, raw = keyed
    create_collection(agent=agent, name="empty")
    assert (
        tool_error(call_tool(client, raw, "search", {"collection": "empty", "question": "q"}))["code"]
        == "not_built"
    )


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
    (
        {"collection": "handbook", "question": QUESTION, "min_score": "high"},
        "'min_score' must be number or null",
    ),
    ({"collection": "handbook", "question": QUESTION, "reader": 7}, "'reader' must be string or null"),
    ({"collection": "", "question": QUESTION}, "'collection' must be at least 1"),
    ({"collection": ["handbook"], "question": QUESTION}, "'collection' must be string"),
]


@pytest.mark.parametrize(("arguments", "message"), BAD_ARGUMENTS)
def test_arguments_outside_the_schema_are_a_tool_error_naming_the_problem(
    client, handbook, keyed, arguments, message
):
    _agent, raw = keyed
    error = tool_error(call_tool(client, raw, "search", arguments))
    assert error["code"] == "invalid_arguments" and message in error["message"]


def test_whole_floats_count_as_integers_like_json_schema_says(client, handbook, keyed):
    _agent, raw = keyed
    result = call_tool(client, raw, "search", {"collection": "handbook", "question": QUESTION, "most": 1.0})
    assert result["isError"] is False and len(result["structuredContent"]["paragraphs"]) == 1


@pytest.mark.parametrize(
    ("params", "fragment"),
    [
        ({"arguments": {}}, "needs the tool's name"),
        ({"name": 5}, "needs the tool's name"),
        ({"name": "delete_everything", "arguments": {}}, "unknown tool 'delete_everything'"),
        ({"name": "search", "arguments": ["handbook", QUESTION]}, "arguments must be an object"),
        ({"name": "search", "arguments": "handbook"}, "arguments must be an object"),
    ],
)
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
    episode = call_tool(
        client, raw, "store", {"text": "Deployed the search service on Tuesday.", "kind": "ep"}
    )
    assert episode["structuredContent"]["kind"] == "ep"
    recalled = call_tool(
        client, raw, "recall", {"question": "when does the staging password rotate", "most": 1}
    )
    excerpts = recalled["structuredContent"]["excerpts"]
    assert len(excerpts) == 1 and excerpts[0]["id"] == stored["structuredContent"]["id"]
    assert "rotates every Monday" in excerpts[0]["text"]


def test_memory_tool_errors_are_tool_results(client, keyed):
    _agent, raw = keyed
    assert tool_error(call_tool(client, raw, "store", {"text": "   "}))["code"] == "empty_text"
    assert (
        tool_error(call_tool(client, raw, "store", {"text": "x", "kind": "note"}))["code"]
        == "invalid_arguments"
    )
    assert (
        tool_error(call_tool(client, raw, "recall", {"query": "q", "most": 99}))["code"]
        == "invalid_arguments"
    )


def test_answers_match_the_published_output_schemas(client, handbook, keyed):
    """Checked with the independent `jsonschema` package, for successes and for errors alike."""
    _agent, raw = keyed
    schemas = {
        t["name"]: t["outputSchema"] for t in call(client, raw, "tools/list").json()["result"]["tools"]
    }
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
        # Closed: nothing the declaration (collections_app.schemas, memory_app.schemas) lacks.
        jsonschema.validate(result["structuredContent"], closed(schemas[name]))


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
    {
        "collection": "c",
        "question": "q",
        "around": None,
        "reader": None,
        "onBehalfOf": None,
        "min_score": None,
    },
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
