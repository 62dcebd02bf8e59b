"""The MCP transport at /mcp (keys, bodies, versions, batches, origins) with Django's test client, then
the official Python and TypeScript SDK clients against a live server."""
# ruff: noqa: F811  (the fixtures `keyed` and `handbook` are imported from test_mcp and requested by name)

import json
import logging

import pytest

from collections_app.services.agents import create_agent, create_collection, revoke_key
from collections_app.services.builds import build_collection
from ragsite.mcp import protocol, registry, transport
from tests.collections.test_mcp import ANSWER, HERE, LATEST, QUESTION, call, call_tool, handbook, keyed, send  # noqa: F401
from tests.conftest import HANDBOOK

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


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        b"   ",
        b"\xff\xfe{}",
        b'{"jsonrpc": "2.0", "id": NaN, "method": "ping"}',
        b"[" * 100_000 + b"]" * 100_000,
    ],
)
def test_a_body_that_is_not_json_is_a_parse_error(client, keyed, body):
    _agent, raw = keyed
    response = send(client, raw, None, raw_body=body)
    assert response.status_code == 400
    assert response.json() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": response.json()["error"]["message"]},
    }


@pytest.mark.parametrize(
    "message",
    [
        5,
        "ping",
        None,
        {"id": 1, "method": "ping"},
        {"jsonrpc": "1.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1},
        {"jsonrpc": "2.0", "id": 1, "method": 7},
        {"jsonrpc": "2.0", "id": None, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1.5, "method": "ping"},
        {"jsonrpc": "2.0", "id": True, "method": "ping"},
        {"jsonrpc": "2.0", "id": 1, "method": "ping", "params": "x"},
    ],
)
def test_an_invalid_request_is_32600(client, keyed, message):
    _agent, raw = keyed
    response = send(client, raw, message)
    assert response.status_code == 400 and response.json()["error"]["code"] == -32600


def test_array_params_are_invalid_params(client, keyed):
    _agent, raw = keyed
    assert call(client, raw, "ping", [1]).json()["error"]["code"] == -32602


@pytest.mark.parametrize(
    "method", ["resources/subscribe", "prompts/list", "server/discover", "tools/delete", ""]
)
def test_an_unknown_method_is_32601(client, keyed, method):
    _agent, raw = keyed
    response = call(client, raw, method, {}, id_=9)
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32601 and response.json()["id"] == 9


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}},
        {"jsonrpc": "2.0", "method": "notifications/never-heard-of"},
        {"jsonrpc": "2.0", "method": "tools/call", "params": "not even an object"},
        {"jsonrpc": "2.0", "id": 3, "result": {}},
        {"jsonrpc": "2.0", "id": 3, "error": {"code": -1, "message": "no"}},
    ],
)
def test_notifications_and_responses_are_accepted_with_202_and_no_body(client, keyed, message):
    _agent, raw = keyed
    response = send(client, raw, message)
    assert response.status_code == 202 and response.content == b""


@pytest.mark.parametrize("method", ["get", "delete", "put", "patch", "options"])
def test_anything_but_post_is_405(client, keyed, method):
    _agent, raw = keyed
    response = getattr(client, method)(
        "/mcp", headers={"Authorization": f"Bearer {raw}", "Accept": "text/event-stream"}
    )
    assert response.status_code == 405 and response["Allow"] == "POST"
    assert response.json()["error"]["code"] == "method_not_allowed"


def test_a_body_over_one_mebibyte_is_413(client, keyed):
    _agent, raw = keyed
    big = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "store", "arguments": {"text": "x" * (1024 * 1024)}},
        }
    )
    response = send(client, raw, None, raw_body=big)
    assert response.status_code == 413 and response.json()["error"]["code"] == "too_large"


def test_a_body_that_is_not_declared_json_is_415_and_a_client_refusing_json_406(client, keyed):
    _agent, raw = keyed
    ping = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"})
    assert send(client, raw, None, raw_body=ping, content_type="text/plain").status_code == 415
    assert send(client, raw, None, raw_body=ping, Accept="text/event-stream").status_code == 406
    assert send(client, raw, None, raw_body=ping, Accept="text/event-stream, */*;q=0.1").status_code == 200
    assert (
        send(client, raw, None, raw_body=ping, content_type="application/json; charset=utf-8").status_code
        == 200
    )


@pytest.mark.parametrize(
    ("origin", "status"),
    [
        ("http://localhost:6274", 200),
        ("http://127.0.0.1", 200),
        ("http://[::1]:8080", 200),
        ("https://ragsite.example", 200),
        ("https://evil.example", 403),
        ("null", 403),
        ("file://", 403),
        ("http://localhost.evil.example", 403),
    ],
)
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
    # 2026-07-28's UnsupportedProtocolVersionError: the versions spoken, newest first, and the one asked for.
    _agent, raw = keyed
    response = call(client, raw, "ping", version="2024-11-05", id_=7)
    assert response.status_code == 400
    error = response.json()["error"]
    assert response.json()["id"] == 7 and error["code"] == -32022 and "2025-06-18" in error["message"]
    assert error["data"] == {
        "supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"],
        "requested": "2024-11-05",
    }
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

    monkeypatch.setitem(
        registry.TOOLS,
        "broken",
        registry.Tool(
            name="broken",
            title="Broken",
            description="fails",
            handler=broken,
            input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        ),
    )
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
    knowledge_folder("handbook", HANDBOOK, agent="live")
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
            found = await session.call_tool(
                "search", {"collection": "handbook", "question": QUESTION, "around": 0}
            )
            missing = await session.call_tool("search", {"collection": "nope", "question": QUESTION})
            wrong = await session.call_tool(
                "search", {"collection": "handbook", "question": QUESTION, "most": 99}
            )
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


# The SDK clients of both eras (Python's mcp.Client and TypeScript's v1 and v2) at each revision:
# test_mcp_modern.py.
