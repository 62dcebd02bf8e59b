"""Hostile numbers: an integer past a double's range, or past ±2**53, is refused by field name on every
surface (API, /v1, MCP) and in a sidecar, never a 500; and a property test drives the parsers with any
JSON a client could send."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collections_app import openai_api
from collections_app.index.filters import FilterError, checked_attributes, parse_filter
from collections_app.models import Document
from collections_app.schemas.vector_stores import VectorStoreSearchIn
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from ragsite.bodies import SAFE_INTEGER, bounded_number
from ragsite.errors import RagsiteError
from tests.collections.test_mcp import call_tool, tool_error
from tests.conftest import HANDBOOK

BIG = 10**400  # past float's range: float(BIG) raises OverflowError
UNSAFE = SAFE_INTEGER + 1  # a double's range, but not exact in one


@pytest.mark.parametrize("value", [BIG, -BIG, UNSAFE, -UNSAFE, float("inf"), float("nan")])
def test_a_number_out_of_bounds_is_refused_by_the_filter_and_sidecar_parsers(value):
    with pytest.raises(FilterError, match=r"filters\.value must be a finite number"):
        parse_filter({"type": "eq", "key": "year", "value": value})
    with pytest.raises(FilterError, match=r"filters\.filters\[0\]\.value\[1\]"):
        parse_filter({"type": "and", "filters": [{"type": "in", "key": "year", "value": [1, value]}]})
    with pytest.raises(FilterError, match="attribute 'year'"):
        checked_attributes({"year": value})
    assert parse_filter({"type": "eq", "key": "year", "value": SAFE_INTEGER}).value == float(SAFE_INTEGER)
    assert checked_attributes({"year": 2022}) == {"year": 2022}


@pytest.fixture
def keyed_handbook(db, knowledge_folder):
    agent, raw = create_agent(agent_id="alpha", name="Alpha")
    files = {
        **HANDBOOK,
        "leave.md.meta.json": json.dumps({"team": "hr", "year": 2022}),
        "travel.md.meta.json": '{"team": "finance", "year": 1' + "0" * 400 + "}",
    }
    knowledge_folder("handbook", files)
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    run = build_collection(collection=collection)
    return agent, raw, collection, run


def test_a_sidecar_with_a_huge_number_refuses_that_documents_attributes_and_the_build_goes_on(
    keyed_handbook,
):
    _agent, _raw, collection, run = keyed_handbook
    assert run.status == "succeeded", run.error
    attributes = dict(Document.objects.filter(collection=collection).values_list("name", "attributes"))
    assert attributes["travel.md"] == {} and attributes["leave.md"] == {"team": "hr", "year": 2022}
    assert type(attributes["leave.md"]["year"]) is int
    [warning] = [w for w in run.warnings if "meta.json" in w]
    assert "travel.md.meta.json was not taken" in warning and "attribute 'year'" in warning


BAD_FILTER = {"type": "gt", "key": "year", "value": BIG}


def _post(client, raw, url, body):
    # json.dumps writes BIG's 401 digits, as a hostile client would
    return client.post(
        url,
        data=json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
    )


def test_a_huge_number_is_a_400_naming_its_field_on_every_surface(client, keyed_handbook):
    _agent, raw, _collection, _run = keyed_handbook
    api = _post(
        client, raw, "/api/v1/collections/handbook/search", {"question": "leave", "filters": BAD_FILTER}
    )
    assert api.status_code == 400 and api.json()["error"]["code"] == "invalid_filters"
    assert "filters.value" in api.json()["error"]["message"]
    store = _post(client, raw, "/v1/vector_stores/handbook/search", {"query": "leave", "filters": BAD_FILTER})
    assert store.status_code == 400 and "filters.value" in store.json()["error"]["message"]
    for options, field in (
        ({"score_threshold": BIG}, "score_threshold"),
        ({"score_threshold": -UNSAFE}, "score_threshold"),
        ({"hybrid_search": {"embedding_weight": BIG, "text_weight": 1}}, "embedding_weight"),
        ({"hybrid_search": {"embedding_weight": 0.48, "text_weight": BIG}}, "text_weight"),
    ):
        answer = _post(
            client, raw, "/v1/vector_stores/handbook/search", {"query": "leave", "ranking_options": options}
        )
        assert answer.status_code == 400, answer.content
        assert field in answer.json()["error"]["message"]
    for arguments in (
        {"collection": "handbook", "question": "leave", "filters": BAD_FILTER},
        {"collection": "handbook", "question": "leave", "most": BIG},
        {"collection": "handbook", "question": "leave", "min_score": BIG},
        {"collection": "handbook", "question": "leave", "max_chars": BIG},
    ):
        error = tool_error(call_tool(client, raw, "search", arguments))
        assert error["code"].startswith("invalid_"), error
    # integers from sidecars stay integers in every answer
    store = _post(
        client,
        raw,
        "/v1/vector_stores/handbook/search",
        {"query": "annual leave", "ranking_options": {"score_threshold": 0}},
    ).json()
    years = [r["attributes"]["year"] for r in store["data"] if r["filename"] == "leave.md"]
    assert years and all(type(y) is int and y == 2022 for y in years)
    assert '"year": 2022,' in json.dumps(store) or '"year": 2022}' in json.dumps(store)


# --- Any JSON at the parsers: a value or a clean refusal, never a crash -----------------------------

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)
KEYS = st.sampled_from(["year", "team", "page", "section", "document", "chunk_id", "type", ""])
COMPARISON = st.fixed_dictionaries(
    {"type": st.sampled_from(["eq", "ne", "gt", "gte", "lt", "lte", "in", "nin", "regex"]), "key": KEYS},
    optional={"value": JSON},
)
FILTERISH = st.recursive(
    COMPARISON | JSON,
    lambda inner: st.fixed_dictionaries(
        {"type": st.sampled_from(["and", "or"]), "filters": st.lists(inner, max_size=4)}
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(FILTERISH)
def test_any_json_is_a_filter_or_a_filter_error(raw):
    try:
        parsed = parse_filter(raw)
    except FilterError as exc:
        assert str(exc)
        return
    json.dumps(repr(parsed))  # a value, built all the way


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=70), JSON, max_size=20) | JSON)
def test_any_json_is_attributes_or_a_filter_error(raw):
    try:
        attributes = checked_attributes(raw)
    except FilterError as exc:
        assert str(exc)
        return
    assert all(bounded_number(v) or isinstance(v, str) for v in attributes.values())
    json.dumps(attributes, allow_nan=False)  # every value writes back as JSON, ints as ints


RANKING = st.fixed_dictionaries(
    {},
    optional={
        "ranker": JSON | st.sampled_from(["auto", "default-2024-11-15"]),
        "score_threshold": JSON,
        "hybrid_search": JSON
        | st.fixed_dictionaries({}, optional={"embedding_weight": JSON, "text_weight": JSON}),
    },
)


@settings(max_examples=300, deadline=None)
@given(RANKING | JSON)
def test_any_json_is_ranking_options_or_a_refusal(raw):
    try:
        asked = openai_api.declared(VectorStoreSearchIn, {"query": "q", "ranking_options": raw}, "field")
        options = asked.ranking_options
        openai_api._check_weights(options.hybrid_search if options is not None else None)
    except RagsiteError as exc:
        assert exc.status == 400 and exc.message
        return
    threshold = options.score_threshold if options is not None else None
    assert threshold is None or 0 <= threshold <= 1
