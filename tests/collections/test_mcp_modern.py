"""MCP 2026-07-28 at /mcp beside the handshake era: server/discover, the per-request `_meta` envelope and
its headers, results as the revision shapes them, resource links to cited paragraphs and reading them back.

The official SDK clients of both eras against a live server are at the end."""

import base64
import json
import os
import shutil
import subprocess

import pytest

from collections_app.models import Label, Paragraph
from collections_app.services.agents import create_agent, create_collection, create_reader
from collections_app.services.builds import build_collection
from ragsite.mcp import protocol
from tests.collections import test_mcp
from tests.collections.test_mcp import ANSWER, HERE, QUESTION, call, call_tool
from tests.conftest import HANDBOOK

keyed, handbook = test_mcp.keyed, test_mcp.handbook  # the same fixtures

MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


def modern(client, raw, method, params=None, *, id_=1, meta=META, headers=None, name_header=None):
    """POST one 2026-07-28 request: `_meta` in the body and the headers mirroring it, unless overridden."""
    params = dict(params or {})
    if meta is not None:
        params["_meta"] = meta
    sent = {
        "Authorization": f"Bearer {raw}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": MODERN,
        "Mcp-Method": method,
    }
    named = params.get("name") or params.get("uri")
    if named is not None:
        sent["Mcp-Name"] = name_header if name_header is not None else named
    sent.update(headers or {})
    sent = {k: v for k, v in sent.items() if v is not None}
    body = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}
    return client.post("/mcp", data=json.dumps(body), content_type="application/json", headers=sent)


def test_discover_names_every_version_newest_first_with_capabilities_and_identity(client, keyed):
    _agent, raw = keyed
    response = modern(client, raw, "server/discover", id_="d-1")
    assert response.status_code == 200 and response.json()["id"] == "d-1"
    result = response.json()["result"]
    assert result["resultType"] == "complete"
    assert result["supportedVersions"] == ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]
    assert result["capabilities"] == {
        "tools": {"listChanged": False},
        "resources": {"subscribe": False, "listChanged": False},
    }
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "ragsite"
    assert result["instructions"]
    assert result["cacheScope"] == "public" and isinstance(result["ttlMs"], int) and result["ttlMs"] >= 0


def test_client_info_is_optional(client, keyed):
    _agent, raw = keyed
    meta = {k: v for k, v in META.items() if k != "io.modelcontextprotocol/clientInfo"}
    assert modern(client, raw, "server/discover", meta=meta).status_code == 200


@pytest.mark.parametrize(
    "drop", [None, "io.modelcontextprotocol/protocolVersion", "io.modelcontextprotocol/clientCapabilities"]
)
def test_a_request_without_its_meta_is_invalid_params_400_with_its_id(client, keyed, drop):
    _agent, raw = keyed
    meta = None if drop is None else {k: v for k, v in META.items() if k != drop}
    response = modern(client, raw, "tools/list", meta=meta, id_=101)
    assert response.status_code == 400
    assert response.json()["id"] == 101 and response.json()["error"]["code"] == -32602


def test_a_header_that_disagrees_with_the_meta_is_a_header_mismatch(client, keyed):
    _agent, raw = keyed
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "v999.0.0"}
    response = modern(client, raw, "server/discover", meta=meta, id_=302)
    assert response.status_code == 400
    assert response.json()["id"] == 302 and response.json()["error"]["code"] == -32020
    # The header missing is a mismatch too.
    response = modern(client, raw, "server/discover", headers={"MCP-Protocol-Version": None})
    assert response.status_code == 400 and response.json()["error"]["code"] == -32020


def test_an_unsupported_version_names_the_supported_and_echoes_the_requested(client, keyed):
    _agent, raw = keyed
    meta = {**META, "io.modelcontextprotocol/protocolVersion": "v999.0.0"}
    response = modern(
        client, raw, "server/discover", meta=meta, id_=301, headers={"MCP-Protocol-Version": "v999.0.0"}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert response.json()["id"] == 301 and error["code"] == -32022
    assert error["data"] == {"supported": list(reversed(protocol.PROTOCOL_VERSIONS)), "requested": "v999.0.0"}


@pytest.mark.parametrize("method_header", [None, "prompts/list", "TOOLS/LIST"])
def test_mcp_method_must_be_the_bodys_method(client, keyed, method_header):
    _agent, raw = keyed
    response = modern(client, raw, "tools/list", headers={"Mcp-Method": method_header})
    assert response.status_code == 400 and response.json()["error"]["code"] == -32020


def test_header_names_are_case_insensitive_and_values_trimmed(client, handbook, keyed):
    _agent, raw = keyed
    response = client.post(
        "/mcp",
        content_type="application/json",
        data=json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "tools/call",
                "params": {"name": "collections", "arguments": {}, "_meta": META},
            }
        ),
        headers={
            "Authorization": f"Bearer {raw}",
            "mcp-protocol-version": MODERN,
            "MCP-METHOD": "tools/call",
            "mcp-name": "  collections  ",
        },
    )
    assert response.status_code == 200 and response.json()["result"]["isError"] is False


@pytest.mark.parametrize(
    "sent, accepted",
    [
        ("wrong_tool_name", False),
        ("", False),
        ("=?base64?" + base64.b64encode(b"collections").decode() + "?=", True),
        ("=?base64?SGVs!!!bG8=?=", False),
    ],
)
def test_mcp_name_must_be_the_tools_name_base64_sentinel_decoded(client, handbook, keyed, sent, accepted):
    _agent, raw = keyed
    response = modern(client, raw, "tools/call", {"name": "collections", "arguments": {}}, name_header=sent)
    if accepted:
        assert response.status_code == 200 and response.json()["result"]["isError"] is False
    else:
        assert response.status_code == 400 and response.json()["error"]["code"] == -32020


def test_a_tools_call_without_mcp_name_is_refused(client, handbook, keyed):
    _agent, raw = keyed
    response = modern(
        client, raw, "tools/call", {"name": "collections", "arguments": {}}, headers={"Mcp-Name": None}
    )
    assert response.status_code == 400 and response.json()["error"]["code"] == -32020


@pytest.mark.parametrize(
    "method", ["initialize", "ping", "logging/setLevel", "resources/subscribe", "unknown/method"]
)
def test_methods_the_revision_removed_or_never_had_are_404_method_not_found(client, keyed, method):
    _agent, raw = keyed
    response = modern(client, raw, method, id_=500)
    assert response.status_code == 404
    assert response.json()["id"] == 500 and response.json()["error"]["code"] == -32601


def test_tools_list_is_a_cacheable_complete_result_with_output_schemas(client, keyed):
    _agent, raw = keyed
    result = modern(client, raw, "tools/list").json()["result"]
    assert result["resultType"] == "complete" and result["cacheScope"] == "public" and result["ttlMs"] >= 0
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "ragsite"
    search = next(tool for tool in result["tools"] if tool["name"] == "search")
    assert search["outputSchema"]["anyOf"][0]["required"][0] == "paragraphs" and search["title"]


def test_search_answers_structured_content_and_links_each_cited_paragraph(client, handbook, keyed):
    _agent, raw = keyed
    result = modern(
        client,
        raw,
        "tools/call",
        {"name": "search", "arguments": {"collection": "handbook", "question": QUESTION, "around": 0}},
    ).json()["result"]
    assert result["resultType"] == "complete" and result["isError"] is False
    answer = result["structuredContent"]
    assert json.loads(result["content"][0]["text"]) == answer
    links = result["content"][1:]
    assert [link["type"] for link in links] == ["resource_link"] * len(answer["paragraphs"]) and links
    assert [link["name"] for link in links] == [p["chunk_id"] for p in answer["paragraphs"]]
    best = links[0]
    assert best["uri"] == "ragsite://collections/handbook/paragraphs/" + answer["paragraphs"][0][
        "chunk_id"
    ].replace("#", "%23")
    assert best["mimeType"] == "text/plain" and best["title"].startswith("leave.md")

    read = modern(client, raw, "resources/read", {"uri": best["uri"]}).json()["result"]
    assert read["resultType"] == "complete" and read["cacheScope"] == "private" and read["ttlMs"] == 0
    (contents,) = read["contents"]
    assert contents["uri"] == best["uri"] and contents["text"] == answer["paragraphs"][0]["text"]
    assert ANSWER in contents["text"]
    assert contents["_meta"]["dev.ragsite/citation"]["chunk_id"] == answer["paragraphs"][0]["chunk_id"]


def test_links_appear_from_2025_06_18_and_read_back_in_the_handshake_era_too(client, handbook, keyed):
    _agent, raw = keyed
    old = call_tool(
        client, raw, "search", {"collection": "handbook", "question": QUESTION}, version="2025-03-26"
    )
    assert [item["type"] for item in old["content"]] == ["text"]
    # around 0: a link reads back the paragraph it cites (`chunk_id`), not the neighbours stitched to it.
    new = call_tool(
        client,
        raw,
        "search",
        {"collection": "handbook", "question": QUESTION, "around": 0},
        version="2025-11-25",
    )
    link = new["content"][1]
    read = call(client, raw, "resources/read", {"uri": link["uri"]}, version="2025-11-25").json()["result"]
    assert (
        "resultType" not in read
        and read["contents"][0]["text"] == new["structuredContent"]["paragraphs"][0]["text"]
    )
    templates = call(client, raw, "resources/templates/list", version="2025-11-25").json()["result"]
    assert templates["resourceTemplates"][0]["uriTemplate"].startswith("ragsite://collections/")
    assert call(client, raw, "resources/list", version="2025-11-25").json()["result"] == {"resources": []}


@pytest.mark.parametrize(
    "uri",
    [
        "ragsite://collections/handbook/paragraphs/leave.md%23999",
        "ragsite://collections/handbook/paragraphs/nohash",
        "ragsite://collections/elsewhere/paragraphs/leave.md%230",
        "ragsite://collections/handbook/other/leave.md%230",
        "https://example.org/x",
    ],
)
def test_a_link_to_nothing_is_resource_not_found_in_each_eras_code(client, handbook, keyed, uri):
    _agent, raw = keyed
    response = modern(client, raw, "resources/read", {"uri": uri})
    assert response.status_code == 200 and response.json()["error"]["code"] == -32602
    legacy = call(client, raw, "resources/read", {"uri": uri}, version="2025-11-25").json()
    assert legacy["error"]["code"] == -32002


def test_another_agents_paragraph_reads_as_missing(client, handbook, keyed):
    _other, other_raw = create_agent(agent_id="beta", name="Beta")
    response = modern(
        client, other_raw, "resources/read", {"uri": "ragsite://collections/handbook/paragraphs/leave.md%230"}
    )
    assert response.json()["error"]["code"] == -32602
    assert "unknown_collection" == response.json()["error"]["data"]["code"]


def test_a_per_reader_link_reads_only_what_that_reader_may_see(client, keyed, knowledge_folder):
    agent, raw = keyed
    collection = create_collection(agent=agent, name="secret", method="fixed", size=80, per_reader=True)
    knowledge_folder("secret", HANDBOOK)
    assert build_collection(collection=collection).status == "succeeded"
    hidden = Paragraph.objects.get(collection=collection, text__contains=ANSWER)
    hidden.labels.add(Label.objects.create(name="hr"))
    create_reader(external_id="alice", labels=["hr"])
    chunk = f"{hidden.document.name}%23{hidden.index}"
    uri = f"ragsite://collections/secret/paragraphs/{chunk}"
    assert (
        modern(client, raw, "resources/read", {"uri": uri}).json()["error"]["data"]["code"]
        == "reader_required"
    )
    as_bob = modern(client, raw, "resources/read", {"uri": uri + "?reader=bob"}).json()
    as_alice = modern(client, raw, "resources/read", {"uri": uri + "?reader=alice"}).json()
    # Per-reader ids count the reader's own paragraphs (issue 24, item 2): bob's #k is his k-th
    # readable paragraph of the document, never the one he may not read (or none past his last).
    assert "error" in as_bob or ANSWER not in as_bob["result"]["contents"][0]["text"]
    assert ANSWER in as_alice["result"]["contents"][0]["text"]
    # A search for alice links with her reader id, so the link reads back what she was shown.
    result = modern(
        client,
        raw,
        "tools/call",
        {
            "name": "search",
            "arguments": {"collection": "secret", "question": QUESTION, "reader": "alice", "around": 0},
        },
    ).json()["result"]
    assert result["content"][1]["uri"].endswith("?reader=alice")


def test_a_notification_at_2026_is_accepted_without_a_body(client, keyed):
    _agent, raw = keyed
    response = client.post(
        "/mcp",
        content_type="application/json",
        data=json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}),
        headers={"Authorization": f"Bearer {raw}", "MCP-Protocol-Version": MODERN},
    )
    assert response.status_code == 202 and response.content == b""


# --- The official SDK clients of both eras against a live server ------------------------------


@pytest.fixture
def live(live_server, knowledge_folder, transactional_db):
    agent, raw = create_agent(agent_id="live", name="Live")
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK, agent=agent.agent_id)
    assert build_collection(collection=collection).status == "succeeded"
    return f"{live_server.url}/mcp", raw


def _python_client(url: str, raw: str, mode: str):
    import anyio
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async def run():
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {raw}"}, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http), mode=mode) as client,
        ):
            tools = await client.list_tools()
            found = await client.call_tool(
                "search", {"collection": "handbook", "question": QUESTION, "around": 0}
            )
            missing = await client.call_tool("search", {"collection": "nope", "question": QUESTION})
            link = next(item for item in found.content if item.type == "resource_link")
            cited = await client.read_resource(link.uri)
            return client.protocol_version, tools, found, missing, link, cited

    return anyio.run(run)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "mode, expected",
    [("2026-07-28", "2026-07-28"), ("auto", "2026-07-28"), ("legacy", protocol.LATEST_LEGACY)],
)
def test_the_official_python_sdk_at_each_revision(live, mode, expected):
    url, raw = live
    version, tools, found, missing, link, cited = _python_client(url, raw, mode)
    assert version == expected
    assert {"search", "build", "store", "recall"} <= {tool.name for tool in tools.tools}
    assert found.is_error is False
    best = found.structured_content["paragraphs"][0]
    assert ANSWER in best["text"] and best["document"] == "leave.md"
    assert json.loads(found.content[0].text) == found.structured_content
    assert link.name == best["chunk_id"] and cited.contents[0].text == best["text"]
    assert missing.is_error is True and missing.structured_content["error"]["code"] == "unknown_collection"


NODE_V2 = HERE / "node_modules" / "@modelcontextprotocol" / "client"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.skipif(
    not NODE_V2.is_dir(), reason="the TypeScript MCP SDK is not installed: npm ci --prefix tests/collections"
)
@pytest.mark.parametrize(
    "sdk, version, era",
    [("v2", "2026-07-28", "modern"), ("v2", "legacy", "legacy"), ("v1", "legacy", "legacy")],
)
def test_the_official_typescript_sdk_at_each_revision(live, sdk, version, era):
    url, raw = live
    env = {
        **os.environ,
        "MCP_URL": url,
        "MCP_KEY": raw,
        "MCP_SDK": sdk,
        "MCP_VERSION": version,
        "MCP_ARGUMENTS": json.dumps({"collection": "handbook", "question": QUESTION, "around": 0}),
    }
    done = subprocess.run(
        ["node", str(HERE / "mcp_client.mjs")], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["era"] == era and out["sessionId"] is None
    assert out["protocolVersion"] == (version if era == "modern" else protocol.LATEST_LEGACY)
    assert out["server"]["name"] == "ragsite"
    assert out["capabilities"]["tools"] == {"listChanged": False}
    search = out["search"]
    assert search["isError"] is False
    best = search["structuredContent"]["paragraphs"][0]
    assert ANSWER in best["text"]
    assert out["cited"]["contents"][0]["text"] == best["text"]
    # The client validates an error's structuredContent against the outputSchema too: it must pass.
    assert out["missing"]["isError"] is True
    assert out["missing"]["structuredContent"]["error"]["code"] == "unknown_collection"
