# ruff: noqa: F811  (fixtures imported from the reader-token tests are named as arguments)
"""`readerToken` is taken on every route that reads a collection's paragraphs for a reader.

Which routes those are is not typed here: the read audit's test classifies every route of the API,
of config/urls.py and every MCP tool and resource from the routers (a new one fails there until it
is classified), and each read of a collection's paragraphs is one that takes a reader. Each must
have a way in below, or `test_every_route_that_takes_a_reader_takes_a_token` fails."""

import json
from urllib.parse import quote

import pytest

from collections_app.mcp_citations import cited_uri
from tests.collections.test_mcp import call, call_tool
from tests.collections.test_reader_tokens import labelled, provider  # noqa: F401
from tests.test_read_audit import API_READS, MCP_READS

COLLECTION_READS = {"search", "paragraph", "vector_store_search"}


def _bearer(raw, **more):
    return {"Authorization": f"Bearer {raw}", **more}


def api_search(client, raw, token):
    body = {"question": "leave carry-over vault code", "readerToken": token, "min_score": 0}
    answer = client.post(
        "/api/v1/collections/handbook/search",
        data=json.dumps(body),
        content_type="application/json",
        headers=_bearer(raw),
    )
    assert answer.status_code == 200, answer.content
    return {p["document"] for p in answer.json()["paragraphs"]}


def api_paragraph(client, raw, token):
    """Both ways a GET can carry it: the query parameter and the header."""
    seen = set()
    for query, headers in ((f"&readerToken={quote(token)}", {}), ("", {"Ragsite-Reader-Token": token})):
        for chunk_id in ("leave.md%230", "security.md%230"):
            answer = client.get(
                f"/api/v1/collections/handbook/paragraph?chunk_id={chunk_id}{query}",
                headers=_bearer(raw, **headers),
            )
            assert answer.status_code in (200, 404), answer.content
            if answer.status_code == 200:
                seen.add(answer.json()["document"])
    return seen


def vector_store_search(client, raw, token):
    answer = client.post(
        "/v1/vector_stores/handbook/search",
        data=json.dumps({"query": "leave carry-over vault code", "readerToken": token}),
        content_type="application/json",
        headers=_bearer(raw),
    )
    assert answer.status_code == 200, answer.content
    return {hit["filename"] for hit in answer.json()["data"]}


def dify_retrieval(client, raw, token):
    """Dify's request has no field for a reader: the token comes as the header a proxy adds."""
    body = {
        "knowledge_id": "handbook",
        "query": "leave carry-over vault code",
        "retrieval_setting": {"top_k": 5, "score_threshold": 0.0},
    }
    answer = client.post(
        "/api/v1/retrieval",
        data=json.dumps(body),
        content_type="application/json",
        headers=_bearer(raw, **{"Ragsite-Reader-Token": token}),
    )
    assert answer.status_code == 200, answer.content
    return {record["title"] for record in answer.json()["records"]}


def mcp_search(client, raw, token):
    arguments = {"collection": "handbook", "question": "leave carry-over vault code", "readerToken": token}
    result = call_tool(client, raw, "search", {**arguments, "min_score": 0})
    assert result["isError"] is False, result
    return {p["document"] for p in result["structuredContent"]["paragraphs"]}


def mcp_paragraph(client, raw, token):
    """The links a token search cites read back as that reader, and so does a link built by hand."""
    seen = set()
    for chunk_id in ("leave.md#0", "security.md#0"):
        uri = cited_uri("handbook", chunk_id, None, token)
        answer = call(client, raw, "resources/read", {"uri": uri}).json()
        if "result" in answer:
            seen.add(answer["result"]["contents"][0]["_meta"]["dev.ragsite/citation"]["document"])
    arguments = {"collection": "handbook", "question": "leave carry-over", "readerToken": token}
    result = call_tool(client, raw, "search", {**arguments, "min_score": 0})
    for link in (c for c in result["content"] if c["type"] == "resource_link"):
        read = call(client, raw, "resources/read", {"uri": link["uri"]}).json()
        assert "result" in read, read
    return seen


WAYS_IN = {
    ("POST", "/api/v1/collections/{name}/search"): api_search,
    ("GET", "/api/v1/collections/{name}/paragraph"): api_paragraph,
    ("POST", "v1/vector_stores/<str:store_id>/search"): vector_store_search,
    ("*", "api/v1/retrieval"): dify_retrieval,
    "search": mcp_search,
    "resource:ragsite://collections/": mcp_paragraph,
}


def test_every_route_that_takes_a_reader_takes_a_token():
    taking_a_reader = {
        route for route, (_read, (kind, _channel, _target)) in {**API_READS, **MCP_READS}.items()
        if kind in COLLECTION_READS
    }  # fmt: skip
    assert taking_a_reader == set(WAYS_IN)


@pytest.mark.parametrize("route", sorted(map(str, WAYS_IN)))
def test_a_token_reader_reads_what_its_groups_give_on_each_route(client, provider, labelled, route):
    _agent, raw = labelled
    read = {str(k): v for k, v in WAYS_IN.items()}[route]
    assert read(client, raw, provider.token(groups=["hr"])) == {"leave.md"}
    assert read(client, raw, provider.token(groups=["security-team"])) == {"security.md"}
    assert read(client, raw, provider.token(groups=[])) == set()


def test_a_forged_token_reads_no_paragraph_by_id(client, provider, labelled):
    from joserfc.jwk import RSAKey

    _agent, raw = labelled
    forged = provider.token(key=RSAKey.generate_key(2048, parameters={"kid": "k1"}))
    answer = client.get(
        "/api/v1/collections/handbook/paragraph?chunk_id=leave.md%230",
        headers=_bearer(raw, **{"Ragsite-Reader-Token": forged}),
    )
    assert answer.status_code == 401 and answer.json()["error"]["code"] == "reader_token_invalid"
    read = call(client, raw, "resources/read", {"uri": cited_uri("handbook", "leave.md#0", None, forged)})
    assert "result" not in read.json() and "reader token" in read.json()["error"]["message"]
