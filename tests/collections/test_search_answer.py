"""The search answer is declared once (collections_app/schemas/search.py): the service's answers are what it
declares, the API publishes it, and the MCP tool's output schema is generated from it."""

import jsonschema
import pytest

from collections_app import mcp_tools
from collections_app.schemas.search import ParagraphOut, SearchOut
from collections_app.services.search import search_collection
from ragsite.mcp import registry
from ragsite.schemas import json_schema_of

pytestmark = pytest.mark.django_db

QUESTION = "how many days of annual leave carry over"


def test_a_search_answers_with_exactly_the_declared_fields(agent, handbook):
    answer = search_collection(agent=agent, collection="handbook", question=QUESTION, around=1)
    assert answer["paragraphs"]
    SearchOut.model_validate(answer)
    declared = set(SearchOut.model_fields)
    assert set(answer) <= declared
    assert {name for name, field in SearchOut.model_fields.items() if field.is_required()} <= set(answer)
    for paragraph in answer["paragraphs"]:
        assert set(paragraph) <= set(ParagraphOut.model_fields)
        required = {name for name, field in ParagraphOut.model_fields.items() if field.is_required()}
        assert required <= set(paragraph)
    jsonschema.validate(answer, registry.TOOLS["search"].output_schema)


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
