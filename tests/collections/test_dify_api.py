"""Dify's External Knowledge API: Dify's own request examples answered in Dify's record shape, from the
same search as the JSON API, with Dify's error codes, reader labels and the answer budget."""

import json

import httpx
import pytest

from collections_app.models import Label, Paragraph
from collections_app.schemas.dify import DifyErrorOut, DifyRecordsOut
from collections_app.services.agents import create_agent, create_collection, create_reader
from collections_app.services.builds import build_collection
from tests.collections import test_mcp
from tests.conftest import HANDBOOK
from tests.declared import assert_declared

QUESTION, ANSWER = test_mcp.QUESTION, test_mcp.ANSWER
keyed, handbook = test_mcp.keyed, test_mcp.handbook  # agent "alpha" and its built "handbook"

# Dify's documented example request (its External Knowledge API page), with this server's knowledge
# id and question in place of the placeholders.
DIFY_EXAMPLE = {
    "knowledge_id": "handbook",
    "query": QUESTION,
    "retrieval_setting": {"top_k": 2, "score_threshold": 0.5},
}
# The same with the metadata condition Dify's page shows (names as a list, as its older page has them).
DIFY_METADATA_EXAMPLE = {
    **DIFY_EXAMPLE,
    "metadata_condition": {
        "logical_operator": "and",
        "conditions": [{"name": ["team"], "comparison_operator": "is", "value": "people"}],
    },
}


def retrieve(client, body, *, key=None, authorization=None, **headers):
    if authorization is None and key is not None:
        authorization = f"Bearer {key}"
    if authorization is not None:
        headers["Authorization"] = authorization
    return client.post(
        "/api/v1/retrieval", data=json.dumps(body), content_type="application/json", headers=headers
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


def test_difys_example_request_gets_records_from_the_same_search_as_the_api(client, handbook, keyed):
    _agent, raw = keyed
    response = retrieve(
        client, {**DIFY_EXAMPLE, "retrieval_setting": {"top_k": 2, "score_threshold": 0.0}}, key=raw
    )
    assert response.status_code == 200, response.content
    records = response.json()["records"]
    api = api_search(client, raw, {"question": QUESTION, "most": 2})
    assert [r["content"] for r in records] == [p["text"] for p in api["paragraphs"]]
    assert [r["score"] for r in records] == [p["score"] for p in api["paragraphs"]]
    assert len(records) <= 2 and ANSWER in records[0]["content"]
    best = records[0]
    assert best["title"] == "leave.md"
    assert isinstance(best["metadata"], dict)  # never null: Dify's pipeline fails on null metadata
    assert best["metadata"]["chunk_id"] == api["paragraphs"][0]["chunk_id"]
    assert best["metadata"]["document"] == "leave.md"
    assert_declared(response.json(), DifyRecordsOut)  # exactly the declared keys, at every depth


def test_score_threshold_is_the_floor_and_zero_leaves_the_collections_own(client, handbook, keyed):
    _agent, raw = keyed
    strict = retrieve(
        client, {**DIFY_EXAMPLE, "retrieval_setting": {"top_k": 50, "score_threshold": 0.99}}, key=raw
    )
    assert strict.status_code == 200 and strict.json() == {"records": []}  # Dify's "no match" answer
    off = retrieve(
        client, {**DIFY_EXAMPLE, "retrieval_setting": {"top_k": 50, "score_threshold": 0.0}}, key=raw
    )
    floored = api_search(client, raw, {"question": QUESTION, "most": 50})
    assert [r["score"] for r in off.json()["records"]] == [p["score"] for p in floored["paragraphs"]]
    assert all(r["score"] >= floored["floor"] for r in off.json()["records"])
    # top_k above the search's bound of 50 is answered with at most 50, which Dify's contract allows.
    many = retrieve(
        client, {**DIFY_EXAMPLE, "retrieval_setting": {"top_k": 500, "score_threshold": 0.0}}, key=raw
    )
    assert many.status_code == 200 and len(many.json()["records"]) <= 50


def test_difys_error_codes(client, handbook, keyed):
    _agent, raw = keyed
    for authorization in (None, "Basic abc", "Bearer", raw):
        refused = retrieve(client, DIFY_EXAMPLE, authorization=authorization)
        assert refused.status_code == 403 and refused.json()["error_code"] == 1001, authorization
        assert "Bearer" in refused.json()["error_msg"]
    wrong = retrieve(client, DIFY_EXAMPLE, key="rk_not_a_key")
    assert wrong.status_code == 403 and wrong.json()["error_code"] == 1002
    missing = retrieve(client, {**DIFY_EXAMPLE, "knowledge_id": "AAA-BBB-CCC"}, key=raw)
    assert missing.status_code == 404 and missing.json()["error_code"] == 2001
    # Another agent's collection is as missing as one that does not exist.
    _other, other_raw = create_agent(agent_id="beta", name="Beta")
    theirs = retrieve(client, DIFY_EXAMPLE, key=other_raw)
    assert theirs.status_code == 404 and theirs.json()["error_code"] == 2001
    # Each refusal carries the project's error shape too, and is exactly the declared error.
    assert missing.json()["error"]["code"] == "unknown_collection"
    for answer in (refused, wrong, missing, theirs):
        assert_declared(answer.json(), DifyErrorOut)


@pytest.mark.parametrize(
    "body, message",
    [
        ({"query": QUESTION, "retrieval_setting": {"top_k": 2, "score_threshold": 0.5}}, "knowledge_id"),
        ({**DIFY_EXAMPLE, "query": ""}, "query"),
        ({**DIFY_EXAMPLE, "query": "x" * 2001}, "at most 2000 characters"),
        ({k: v for k, v in DIFY_EXAMPLE.items() if k != "retrieval_setting"}, "retrieval_setting"),
        ({**DIFY_EXAMPLE, "retrieval_setting": {"top_k": 0, "score_threshold": 0.5}}, "top_k"),
        ({**DIFY_EXAMPLE, "retrieval_setting": {"top_k": 2}}, "score_threshold"),
        ({**DIFY_EXAMPLE, "retrieval_setting": {"top_k": 2, "score_threshold": 1.5}}, "score_threshold"),
        ({**DIFY_EXAMPLE, "retrieval_setting": {"top_k": 2, "score_threshold": 0.5, "x": 1}}, "unknown"),
        ({**DIFY_EXAMPLE, "extra": 1}, "unknown field"),
        ({**DIFY_EXAMPLE, "metadata_condition": {"conditions": []}}, "conditions"),
        ({**DIFY_EXAMPLE, "metadata_condition": {"logical_operator": "xor", "conditions": []}}, "and or or"),
        ({**DIFY_EXAMPLE, "retrieval_setting": {"top_k": True, "score_threshold": 0.5}}, "top_k"),
        ({**DIFY_EXAMPLE, "retrieval_setting": {"top_k": 2, "score_threshold": "0.5"}}, "score_threshold"),
        (
            {**DIFY_EXAMPLE, "metadata_condition": {"conditions": [{"name": "a", "value": 1}]}},
            "metadata_condition.conditions[0].comparison_operator",
        ),
        (
            {
                **DIFY_EXAMPLE,
                "metadata_condition": {
                    "conditions": [{"name": "a", "comparison_operator": "is", "value": 1, "zz": 2}]
                },
            },
            "unknown field(s) 'zz' in metadata_condition.conditions[0]",
        ),
    ],
)
def test_a_bad_request_is_a_400_saying_what(client, handbook, keyed, body, message):
    _agent, raw = keyed
    response = retrieve(client, body, key=raw)
    assert response.status_code == 400, response.content
    assert (
        message in response.json()["error_msg"]
        and response.json()["error"]["message"] == response.json()["error_msg"]
    )


def test_an_operator_the_filters_cannot_express_is_refused_by_name(client, handbook, keyed):
    _agent, raw = keyed
    body = {
        **DIFY_EXAMPLE,
        "metadata_condition": {
            "conditions": [{"name": "team", "comparison_operator": "contains", "value": "p"}]
        },
    }
    response = retrieve(client, body, key=raw)
    assert response.status_code == 400 and response.json()["error"]["code"] == "unsupported_operator"
    assert "'contains'" in response.json()["error_msg"]


def test_metadata_condition_filters_by_document_attributes(client, keyed, knowledge_folder):
    agent, raw = keyed
    files = {
        **HANDBOOK,
        "leave.md.meta.json": json.dumps({"team": "people"}),
        "security.md.meta.json": json.dumps({"team": "facilities"}),
    }
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", files)
    assert build_collection(collection=collection).status == "succeeded"
    collection.min_score = 0.0  # the collection's own floor, which Dify's threshold 0.0 leaves in place
    collection.save(update_fields=["min_score"])
    wide = {"top_k": 50, "score_threshold": 0.0}
    body = {**DIFY_METADATA_EXAMPLE, "query": "days badges", "retrieval_setting": wide}
    records = retrieve(client, body, key=raw).json()["records"]
    assert records and {r["title"] for r in records} == {"leave.md"}
    assert all(r["metadata"]["team"] == "people" for r in records)
    either = {
        "logical_operator": "or",
        "conditions": [
            {"name": "team", "comparison_operator": "is", "value": "people"},
            {"name": "team", "comparison_operator": "in", "value": ["facilities"]},
        ],
    }
    both = retrieve(client, {**body, "metadata_condition": either}, key=raw).json()["records"]
    assert {r["title"] for r in both} == {"leave.md", "security.md"}


def test_reader_labels_hold_through_the_reader_header(client, keyed, knowledge_folder):
    agent, raw = keyed
    collection = create_collection(agent=agent, name="secret", method="fixed", size=80, per_reader=True)
    knowledge_folder("secret", HANDBOOK)
    assert build_collection(collection=collection).status == "succeeded"
    Paragraph.objects.get(collection=collection, text__contains=ANSWER).labels.add(
        Label.objects.create(name="hr")
    )
    create_reader(external_id="alice", labels=["hr"])
    body = {
        **DIFY_EXAMPLE,
        "knowledge_id": "secret",
        "retrieval_setting": {"top_k": 50, "score_threshold": 0.0},
    }
    nobody = retrieve(client, body, key=raw)
    assert nobody.status_code == 400 and nobody.json()["error"]["code"] == "reader_required"

    def texts(response):
        assert response.status_code == 200, response.content
        return " ".join(r["content"] for r in response.json()["records"])

    assert ANSWER in texts(retrieve(client, body, key=raw, **{"Ragsite-Reader": "alice"}))
    assert ANSWER not in texts(retrieve(client, body, key=raw, **{"Ragsite-Reader": "bob"}))


def test_the_answer_budget_holds(client, handbook, keyed, settings):
    _agent, raw = keyed
    settings.ANSWER_MAX_CHARS = 200
    body = {**DIFY_EXAMPLE, "retrieval_setting": {"top_k": 50, "score_threshold": 0.0}}
    records = retrieve(client, body, key=raw).json()["records"]
    assert records and sum(len(r["content"]) for r in records) <= 200


def test_on_behalf_of_is_checked_as_in_the_api(client, handbook, keyed):
    _agent, raw = keyed
    create_agent(agent_id="gamma", name="Gamma")
    refused = retrieve(client, DIFY_EXAMPLE, key=raw, **{"Ragsite-On-Behalf-Of": "gamma"})
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "not_allowed_for_agent"


@pytest.mark.django_db(transaction=True)
def test_difys_example_over_real_http(live_server, knowledge_folder):
    agent, raw = create_agent(agent_id="live", name="Live")
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK, agent=agent.agent_id)
    assert build_collection(collection=collection).status == "succeeded"
    endpoint = f"{live_server.url}/api/v1"  # what a Dify admin types as the API endpoint
    body = {**DIFY_EXAMPLE, "retrieval_setting": {"top_k": 2, "score_threshold": 0.0}}
    answer = httpx.post(
        f"{endpoint}/retrieval", json=body, headers={"Authorization": f"Bearer {raw}"}, timeout=30
    )
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    assert ANSWER in answer.json()["records"][0]["content"]
    refused = httpx.post(f"{endpoint}/retrieval", json=body, timeout=30)
    assert refused.status_code == 403 and refused.json()["error_code"] == 1001
