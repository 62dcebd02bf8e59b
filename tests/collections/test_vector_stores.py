"""OpenAI-compatible vector stores over an agent's collections: the official `openai` SDK against a live
server, the same paragraphs as the JSON API's search, and every refusal of what the search cannot honour."""

import json

import pytest

from collections_app.models import Label, Paragraph
from collections_app.schemas.vector_stores import (
    ResultExtensionOut,
    SearchResultOut,
    SearchResultsOut,
    VectorStoreOut,
    VectorStoresOut,
)
from collections_app.services.agents import create_agent, create_collection, create_reader
from collections_app.services.builds import build_collection
from ragsite import fusion
from tests.collections import test_mcp
from tests.conftest import HANDBOOK
from tests.declared import assert_declared, every_key, required_keys

QUESTION, ANSWER = test_mcp.QUESTION, test_mcp.ANSWER
keyed, handbook = test_mcp.keyed, test_mcp.handbook  # the same fixtures: agent "alpha", its "handbook"


def search(client, raw, body, store="handbook", **headers):
    return client.post(
        f"/v1/vector_stores/{store}/search",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}", **headers},
    )


def api_search(client, raw, body, store="handbook"):
    response = client.post(
        f"/api/v1/collections/{store}/search",
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
    )
    assert response.status_code == 200, response.content
    return response.json()


def test_a_search_answers_the_same_paragraphs_as_the_api(client, handbook, keyed):
    _agent, raw = keyed
    response = search(
        client,
        raw,
        {"query": QUESTION, "max_num_results": 3, "around": 1, "ranking_options": {"score_threshold": 0}},
    )
    assert response.status_code == 200, response.content
    page = response.json()
    assert page["object"] == "vector_store.search_results.page" and page["search_query"] == [QUESTION]
    assert page["has_more"] is False and page["next_page"] is None
    api = api_search(client, raw, {"question": QUESTION, "most": 3, "around": 1, "min_score": 0})
    assert [r["content"] for r in page["data"]] == [
        [{"type": "text", "text": p["text"]}] for p in api["paragraphs"]
    ]
    assert [r["score"] for r in page["data"]] == [p["score"] for p in api["paragraphs"]]
    assert [r["ragsite"]["chunk_id"] for r in page["data"]] == [p["chunk_id"] for p in api["paragraphs"]]
    best = page["data"][0]
    assert ANSWER in best["content"][0]["text"]
    assert best["file_id"] == best["filename"] == "leave.md"
    assert (
        best["attributes"]["document"] == "leave.md"
        and best["attributes"]["chunk_id"] == best["ragsite"]["chunk_id"]
    )
    assert page["ragsite"]["floor"] == 0 and page["ragsite"]["floor_source"] == "request"
    assert page["ragsite"]["refused"] is None and page["ragsite"]["around"] == 1


def test_every_answer_is_its_declaration(client, handbook, keyed):
    """The list, a store and a search page carry exactly the keys `schemas/vector_stores.py` declares,
    the keys OpenAI's SDK reads among them, at every depth."""
    _agent, raw = keyed
    auth = {"Authorization": f"Bearer {raw}"}
    listed = client.get("/v1/vector_stores", headers=auth).json()
    assert listed["data"]
    assert_declared(listed, VectorStoresOut)
    store = client.get("/v1/vector_stores/handbook", headers=auth).json()
    assert_declared(store, VectorStoreOut)
    assert set(store) == every_key(VectorStoreOut)
    page = search(client, raw, {"query": QUESTION, "ranking_options": {"score_threshold": 0}}).json()
    assert page["data"]
    assert_declared(page, SearchResultsOut)
    assert set(page) == every_key(SearchResultsOut)
    for result in page["data"]:
        assert set(result) == every_key(SearchResultOut)
        assert set(result["ragsite"]) >= required_keys(ResultExtensionOut)


@pytest.mark.parametrize(
    "query, code",
    [
        ("limit=0", "invalid_limit"),
        ("limit=101", "invalid_limit"),
        ("limit=ten", "invalid_limit"),
        ("order=up", "invalid_order"),
        ("page=2", "invalid_request"),
    ],
)
def test_the_list_refuses_a_query_outside_its_declaration(client, keyed, query, code):
    _agent, raw = keyed
    response = client.get(f"/v1/vector_stores?{query}", headers={"Authorization": f"Bearer {raw}"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == code
    assert error["param"] == (None if code == "invalid_request" else query.split("=")[0])


def test_defaults_are_openais_ten_results_and_the_collections_floor(client, handbook, keyed):
    _agent, raw = keyed
    page = search(client, raw, {"query": QUESTION}).json()
    api = api_search(client, raw, {"question": QUESTION, "most": 10})
    assert [r["ragsite"]["chunk_id"] for r in page["data"]] == [p["chunk_id"] for p in api["paragraphs"]]
    assert page["ragsite"]["floor"] == api["floor"] and page["ragsite"]["floor_source"] == api["floor_source"]


def test_score_threshold_is_the_floor(client, handbook, keyed):
    _agent, raw = keyed
    everything = search(
        client,
        raw,
        {"query": QUESTION, "max_num_results": 50, "around": 0, "ranking_options": {"score_threshold": 0}},
    ).json()["data"]
    cut = sorted((r["score"] for r in everything), reverse=True)[1]  # the second best
    above = search(
        client,
        raw,
        {"query": QUESTION, "max_num_results": 50, "around": 0, "ranking_options": {"score_threshold": cut}},
    ).json()
    assert above["ragsite"]["floor"] == cut and above["data"]
    assert all(r["score"] >= cut for r in above["data"]) and len(above["data"]) < len(everything)


@pytest.mark.parametrize(
    "body, status, code",
    [
        ({}, 400, "invalid_query"),
        ({"query": ""}, 400, "invalid_query"),
        ({"query": ["one", "two"]}, 400, "invalid_query"),
        ({"query": "x" * 2001}, 400, "invalid_query"),
        ({"query": QUESTION, "max_num_results": 0}, 400, "invalid_max_num_results"),
        ({"query": QUESTION, "max_num_results": 51}, 400, "invalid_max_num_results"),
        ({"query": QUESTION, "max_num_results": "5"}, 400, "invalid_max_num_results"),
        ({"query": QUESTION, "max_num_results": True}, 400, "invalid_max_num_results"),
        ({"query": QUESTION, "around": 6}, 400, "invalid_around"),
        ({"query": QUESTION, "rewrite_query": True}, 400, "rewrite_unsupported"),
        ({"query": QUESTION, "ranking_options": {"ranker": "none"}}, 400, "unsupported_ranker"),
        ({"query": QUESTION, "ranking_options": {"score_threshold": 1.5}}, 400, "invalid_score_threshold"),
        (
            {
                "query": QUESTION,
                "ranking_options": {"hybrid_search": {"embedding_weight": 1, "text_weight": 0}},
            },
            400,
            "unsupported_hybrid_search",
        ),
        (
            {
                "query": QUESTION,
                "ranking_options": {"hybrid_search": {"embedding_weight": 0, "text_weight": 0}},
            },
            400,
            "invalid_hybrid_search",
        ),
        ({"query": QUESTION, "ranking_options": {"boost": 2}}, 400, "invalid_request"),
        ({"query": QUESTION, "top_k": 3}, 400, "invalid_request"),
        ({"query": QUESTION, "reader": 5}, 400, "invalid_request"),
        ({"query": QUESTION, "reader": "r" * 201}, 400, "invalid_request"),
        ({"query": "   "}, 400, "invalid_query"),
        (
            {"query": QUESTION, "ranking_options": {"hybrid_search": {"embedding_weight": -1}}},
            400,
            "invalid_hybrid_search",
        ),
        ({"query": QUESTION, "ranking_options": {"score_threshold": "0.5"}}, 400, "invalid_score_threshold"),
    ],
)
def test_what_the_search_cannot_honour_is_refused_by_name(client, handbook, keyed, body, status, code):
    _agent, raw = keyed
    response = search(client, raw, body)
    assert response.status_code == status
    error = response.json()["error"]
    assert set(error) == {"code", "message", "type", "param"} and error["code"] == code
    assert error["type"] == "invalid_request_error"
    # OpenAI's `param`: the field at fault, as the code names it (an extension's is null).
    field = {
        "invalid_max_num_results": "max_num_results",
        "invalid_around": "around",
        "invalid_score_threshold": "ranking_options.score_threshold",
        "unsupported_ranker": "ranking_options.ranker",
        "invalid_hybrid_search": "ranking_options.hybrid_search",
        "unsupported_hybrid_search": "ranking_options.hybrid_search",
        "rewrite_unsupported": "rewrite_query",
        "invalid_query": "query",
    }
    assert error["param"] == field.get(code)


def test_the_fusions_own_weights_in_any_multiple_are_accepted(client, handbook, keyed):
    _agent, raw = keyed
    weights = {"embedding_weight": fusion.FUSION_WEIGHT * 3, "text_weight": (1 - fusion.FUSION_WEIGHT) * 3}
    plain = search(client, raw, {"query": QUESTION}).json()
    weighted = search(
        client,
        raw,
        {
            "query": QUESTION,
            "rewrite_query": False,
            "ranking_options": {"ranker": "auto", "hybrid_search": weights},
        },
    )
    assert weighted.status_code == 200 and weighted.json()["data"] == plain["data"]
    assert search(client, raw, {"query": [QUESTION]}).json()["data"] == plain["data"]


def test_a_per_reader_store_takes_its_reader_in_the_body_or_a_header(client, keyed, knowledge_folder):
    agent, raw = keyed
    collection = create_collection(agent=agent, name="secret", method="fixed", size=80, per_reader=True)
    knowledge_folder("secret", HANDBOOK)
    assert build_collection(collection=collection).status == "succeeded"
    Paragraph.objects.get(collection=collection, text__contains=ANSWER).labels.add(
        Label.objects.create(name="hr")
    )
    create_reader(external_id="alice", labels=["hr"])
    body = {"query": QUESTION, "max_num_results": 50, "ranking_options": {"score_threshold": 0}}
    assert search(client, raw, body, store="secret").json()["error"]["code"] == "reader_required"

    def texts(page):
        return " ".join(r["content"][0]["text"] for r in page["data"])

    assert ANSWER in texts(search(client, raw, {**body, "reader": "alice"}, store="secret").json())
    assert ANSWER in texts(search(client, raw, body, store="secret", **{"Ragsite-Reader": "alice"}).json())
    assert ANSWER not in texts(search(client, raw, {**body, "reader": "bob"}, store="secret").json())
    conflict = search(client, raw, {**body, "reader": "bob"}, store="secret", **{"Ragsite-Reader": "alice"})
    assert conflict.status_code == 400 and "disagree" in conflict.json()["error"]["message"]


def test_on_behalf_of_is_checked_as_in_the_api(client, handbook, keyed):
    _agent, raw = keyed
    create_agent(agent_id="gamma", name="Gamma")
    refused = search(client, raw, {"query": QUESTION, "onBehalfOf": "gamma"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_allowed_for_agent"
    assert search(client, raw, {"query": QUESTION}, **{"Ragsite-On-Behalf-Of": "alpha"}).status_code == 200


def test_keys_methods_and_other_agents_stores(client, handbook, keyed):
    _agent, raw = keyed
    response = client.post("/v1/vector_stores/handbook/search", data="{}", content_type="application/json")
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Bearer"
    # A route OpenAI has and ragsite does not serve (search by GET, create, update, delete) is 404, as
    # OpenAI answers a URL it lacks: the SDK raises NotFoundError for it.
    auth = {"Authorization": f"Bearer {raw}"}
    for method, route in [
        ("get", "/v1/vector_stores/handbook/search"),
        ("post", "/v1/vector_stores"),
        ("post", "/v1/vector_stores/handbook"),
        ("delete", "/v1/vector_stores/handbook"),
    ]:
        response = getattr(client, method)(route, headers=auth)
        error = response.json()["error"]
        assert response.status_code == 404 and error["code"] == "not_found", route
        assert error["type"] == "invalid_request_error" and error["param"] is None
    _other, other_raw = create_agent(agent_id="beta", name="Beta")
    for route in ("/v1/vector_stores/handbook", "/v1/vector_stores/nope"):
        missing = client.get(route, headers={"Authorization": f"Bearer {other_raw}"})
        assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_collection"
    assert search(client, other_raw, {"query": QUESTION}).status_code == 404
    assert client.post(
        "/v1/vector_stores/handbook/search", data="{}", content_type="application/json"
    ).json()["error"] == {
        "code": "unauthorized",
        "message": "a valid API key is required: Authorization: Bearer <key>",
        "type": "invalid_request_error",
        "param": None,
    }
    assert (
        client.get("/v1/vector_stores/handbook/files", headers={"Authorization": f"Bearer {raw}"}).status_code
        == 404
    )
    response = search(client, raw, {}, CONTENT_LENGTH=str(2 * 1024 * 1024))
    assert response.status_code == 413


def test_a_store_describes_its_collection(client, handbook, keyed):
    _agent, raw = keyed
    store = client.get("/v1/vector_stores/handbook", headers={"Authorization": f"Bearer {raw}"}).json()
    assert store["id"] == store["name"] == "handbook" and store["object"] == "vector_store"
    assert store["status"] == "completed" and store["usage_bytes"] > 0
    assert store["file_counts"] == {"in_progress": 0, "completed": 3, "failed": 0, "cancelled": 0, "total": 3}
    assert store["metadata"] == {"per_reader": "false", "counts_include_restricted": "false", "built": "true"}
    assert isinstance(store["created_at"], int)
    collection = client.get("/api/v1/collections/handbook", headers={"Authorization": f"Bearer {raw}"}).json()
    assert collection["built"]["counts_include_restricted"] is False


def test_a_store_never_built_says_so_and_a_per_reader_one_says_its_counts_are_everyones(
    client, keyed, knowledge_folder
):
    from collections_app.services.builds import request_build

    agent, raw = keyed
    auth = {"Authorization": f"Bearer {raw}"}
    create_collection(agent=agent, name="empty")
    store = client.get("/v1/vector_stores/empty", headers=auth).json()
    assert store["status"] == "expired" and store["metadata"]["built"] == "false"  # never "completed"
    refused = search(client, raw, {"query": "leave"}, store="empty").json()
    assert refused["error"]["code"] == "not_built"
    knowledge_folder("labs", {"leave.md": "# Leave\n\nFive days carry over.\n"})
    labs = create_collection(agent=agent, name="labs", per_reader=True)
    request_build(collection=labs, enqueue=False)
    listed = {s["id"]: s for s in client.get("/v1/vector_stores", headers=auth).json()["data"]}
    assert listed["labs"]["status"] == "in_progress"
    assert listed["labs"]["metadata"]["counts_include_restricted"] == "true"
    assert listed["empty"]["metadata"]["counts_include_restricted"] == "false"


def test_the_list_pages_by_cursor(client, keyed):
    agent, raw = keyed
    for name in ("a", "b", "c", "d"):
        create_collection(agent=agent, name=name)
    auth = {"Authorization": f"Bearer {raw}"}
    first = client.get("/v1/vector_stores?limit=2&order=asc", headers=auth).json()
    assert [s["id"] for s in first["data"]] == ["a", "b"] and first["has_more"] is True
    assert first["first_id"] == "a" and first["last_id"] == "b"
    rest = client.get("/v1/vector_stores?limit=2&order=asc&after=b", headers=auth).json()
    assert [s["id"] for s in rest["data"]] == ["c", "d"] and rest["has_more"] is False
    newest = client.get("/v1/vector_stores", headers=auth).json()
    assert [s["id"] for s in newest["data"]] == ["d", "c", "b", "a"]
    assert client.get("/v1/vector_stores?limit=0", headers=auth).json()["error"]["code"] == "invalid_limit"
    assert client.get("/v1/vector_stores?order=up", headers=auth).json()["error"]["code"] == "invalid_order"
    assert client.get("/v1/vector_stores?after=zz", headers=auth).status_code == 404


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_official_openai_sdk_searches_a_live_server(live_server, knowledge_folder):
    import httpx
    from openai import BadRequestError, NotFoundError, OpenAI

    agent, raw = create_agent(agent_id="live", name="Live")
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK, agent=agent.agent_id)
    assert build_collection(collection=collection).status == "succeeded"
    sdk = OpenAI(api_key=raw, base_url=f"{live_server.url}/v1", max_retries=0)

    stores = sdk.vector_stores.list()
    assert [store.id for store in stores.data] == ["handbook"] and stores.data[0].status == "completed"
    assert sdk.vector_stores.retrieve("handbook").file_counts.completed == 3

    page = sdk.vector_stores.search(
        "handbook",
        query=QUESTION,
        max_num_results=4,
        ranking_options={"score_threshold": 0.0},
        extra_body={"around": 0},
    )
    results = list(page)
    api = httpx.post(
        f"{live_server.url}/api/v1/collections/handbook/search",
        timeout=30,
        headers={"Authorization": f"Bearer {raw}"},
        json={"question": QUESTION, "most": 4, "around": 0, "min_score": 0},
    ).json()
    assert [r.content[0].text for r in results] == [p["text"] for p in api["paragraphs"]]
    assert [r.score for r in results] == [p["score"] for p in api["paragraphs"]]
    assert ANSWER in results[0].content[0].text and results[0].filename == "leave.md"
    assert results[0].attributes["chunk_id"] == api["paragraphs"][0]["chunk_id"]
    assert page.ragsite["floor"] == 0  # the extension object survives the SDK's model

    with pytest.raises(BadRequestError, match="rewrite_query is not supported"):
        sdk.vector_stores.search("handbook", query=QUESTION, rewrite_query=True)
    with pytest.raises(NotFoundError):
        sdk.vector_stores.search("nope", query=QUESTION)


@pytest.mark.parametrize(
    "filters, code",
    [
        ("team", "invalid_filters"),
        (["team"], "invalid_filters"),
        ({"type": "eq", "key": "team"}, "invalid_filters"),
        ({"type": "gt", "key": "year", "value": "2023"}, "invalid_filters"),
    ],
)
def test_a_malformed_filter_has_one_code_on_both_routes(client, handbook, keyed, filters, code):
    _agent, raw = keyed
    openai_style = search(client, raw, {"query": QUESTION, "filters": filters})
    api = client.post(
        "/api/v1/collections/handbook/search",
        data=json.dumps({"question": QUESTION, "filters": filters}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
    )
    assert openai_style.status_code == api.status_code == 400
    assert openai_style.json()["error"]["code"] == api.json()["error"]["code"] == code
    assert openai_style.json()["error"]["param"] == "filters"


def test_a_body_too_deep_has_the_json_apis_code(client, handbook, keyed):
    _agent, raw = keyed
    deep = "[" * 5000 + "]" * 5000
    body = '{"query": "x", "filters": ' + deep + "}"
    answers = [
        client.post(
            route, data=body, content_type="application/json", headers={"Authorization": f"Bearer {raw}"}
        )
        for route in ("/v1/vector_stores/handbook/search", "/api/v1/collections/handbook/search")
    ]
    assert [a.status_code for a in answers] == [400, 400]
    assert answers[0].json()["error"]["code"] == answers[1].json()["error"]["code"] == "malformed_json"


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_openai_sdk_sees_pages_and_whole_number_attributes(live_server, knowledge_folder):
    """A PDF's hits carry their pages as an attribute (and in `ragsite`), a sidecar's 2022 stays 2022 on
    the wire, and errors carry OpenAI's type and param, as the SDK reads them."""
    from openai import BadRequestError, NotFoundError, OpenAI

    from collections_app.samples import pdf_bytes
    from tests.collections.test_pdf import MANUAL

    agent, raw = create_agent(agent_id="pages", name="Pages")
    collection = create_collection(agent=agent, name="manual")
    knowledge_folder(
        "manual",
        {"manual.pdf": pdf_bytes(MANUAL), "manual.pdf.meta.json": '{"year": 2022, "team": "safety"}'},
        agent=agent.agent_id,
    )
    assert build_collection(collection=collection).status == "succeeded"
    sdk = OpenAI(api_key=raw, base_url=f"{live_server.url}/v1", max_retries=0)
    question = "Where is the assembly point in case of fire?"
    results = list(
        sdk.vector_stores.search(
            "manual",
            query=question,
            max_num_results=2,
            ranking_options={"score_threshold": 0.0},
            extra_body={"around": 0},
        )
    )
    best = results[0]
    assert "car park B" in best.content[0].text
    assert best.attributes["pages"] == "4" and best.ragsite["pages"] == [4, 4]
    spans = [r.ragsite["pages"] for r in results]
    assert all(
        r.attributes["pages"] == "-".join(map(str, sorted(set(p))))
        for r, p in zip(results, spans, strict=True)
    )
    assert best.attributes["team"] == "safety" and best.attributes["year"] == 2022
    raw_page = sdk.vector_stores.with_raw_response.search("manual", query=question, max_num_results=1)
    wire = raw_page.http_response.json()["data"][0]["attributes"]
    assert wire["year"] == 2022 and isinstance(wire["year"], int)  # the SDK's own type makes it 2022.0

    with pytest.raises(BadRequestError) as refused:
        sdk.vector_stores.search("manual", query=question, max_num_results=0)
    assert refused.value.code == "invalid_max_num_results" and refused.value.param == "max_num_results"
    assert refused.value.type == "invalid_request_error"
    with pytest.raises(NotFoundError) as missing:
        sdk.vector_stores.delete("manual")
    assert missing.value.code == "not_found" and "admin" in missing.value.message
