"""The search is declared once (collections_app/schemas/search.py): the service's answers carry exactly
the fields it declares, the API publishes it, and the MCP tool's schemas are generated from it."""

import jsonschema
import pytest

from collections_app import mcp_tools
from collections_app.schemas.search import JudgeOut, ParagraphOut, SearchOut
from collections_app.services.agents import issue_key
from collections_app.services.search import search_collection
from ragsite.mcp import registry
from ragsite.model_calls.rerank import RerankOut
from ragsite.schemas import json_schema_of
from tests.declared import assert_declared, every_key, required_keys
from tests.servers import RerankServer, serving

pytestmark = pytest.mark.django_db

QUESTION = "how many days of annual leave carry over"


@pytest.fixture
def reranker(settings):
    with serving(RerankServer(favourite="lapse")) as server:
        settings.RERANK_URL, settings.RERANK_MODEL = server.url + "/v1/rerank", "rerank-mini"
        settings.RERANK_TIMEOUT = 0.5
        yield server


def test_a_search_answers_with_exactly_the_declared_fields(agent, handbook):
    answer = search_collection(agent=agent, collection="handbook", question=QUESTION, around=1)
    assert answer["paragraphs"]
    assert_declared(answer, SearchOut)
    # Not reranked: every field but those only a reranked answer has.
    assert set(answer) == every_key(SearchOut)
    for paragraph in answer["paragraphs"]:
        assert set(paragraph) == required_keys(ParagraphOut)
    assert set(answer["rerank"]) == required_keys(RerankOut)
    assert set(answer["judge"]) == required_keys(JudgeOut)
    jsonschema.validate(answer, registry.TOOLS["search"].output_schema)


def test_a_reranked_search_answers_every_declared_field(agent, handbook, reranker):
    answer = search_collection(agent=agent, collection="handbook", question=QUESTION, around=1)
    assert answer["paragraphs"] and answer["rerank"]["status"] == "reranked"
    assert_declared(answer, SearchOut)
    assert set(answer) == every_key(SearchOut)
    for paragraph in answer["paragraphs"]:
        assert set(paragraph) == every_key(ParagraphOut)
    assert set(answer["rerank"]) == every_key(RerankOut)


def test_the_api_answers_what_the_service_answers(client, agent, handbook):
    _key, raw = issue_key(agent=agent)
    response = client.post(
        "/api/v1/collections/handbook/search",
        {"question": QUESTION},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert response.status_code == 200
    body = response.json()
    assert set(body) == every_key(SearchOut)
    assert {key for paragraph in body["paragraphs"] for key in paragraph} == every_key(ParagraphOut)
    assert body["paragraphs"] == [
        {**p, "rerank_score": None, "fused_rank": None}
        for p in search_collection(agent=agent, collection="handbook", question=QUESTION)["paragraphs"]
    ]


def test_the_mcp_output_schema_is_generated_from_the_declaration():
    schema = mcp_tools.SEARCH_ANSWER
    assert schema == json_schema_of(SearchOut)
    assert set(schema["properties"]) == set(SearchOut.model_fields)
    assert set(schema["required"]) == {n for n, f in SearchOut.model_fields.items() if f.is_required()}
    paragraph = schema["properties"]["paragraphs"]["items"]
    assert set(paragraph["properties"]) == set(ParagraphOut.model_fields)
    assert "$ref" not in str(schema) and "$defs" not in schema  # self-contained, so or_error can nest it
    jsonschema.Draft202012Validator.check_schema(registry.or_error(schema))


def test_the_api_publishes_the_declaration_and_says_what_first_and_last_count(client):
    components = client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    assert set(components["SearchOut"]["properties"]) == set(SearchOut.model_fields)
    paragraph = components["ParagraphOut"]
    assert set(paragraph["properties"]) == set(ParagraphOut.model_fields)
    for end in ("first", "last"):
        description = paragraph["properties"][end]["description"]
        assert "whole collection" not in description
    assert "this search may read" in paragraph["properties"]["first"]["description"]
