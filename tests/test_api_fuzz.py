"""No request body, however wrong, makes the search endpoint fail with a 500."""

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection

values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False)
    | st.text(max_size=50),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=6,
)
fields = st.sampled_from(["question", "reader", "onBehalfOf", "most", "around", "min_score", "extra"])
bodies = st.dictionaries(fields, values, max_size=6) | values


@pytest.fixture
def searchable(db, knowledge_folder):
    agent, raw = create_agent(agent_id="fuzz")
    collection = create_collection(agent=agent, name="handbook")
    knowledge_folder("handbook", {"a.md": "# A\n\nCarry-over is capped at five days."}, agent="fuzz")
    build_collection(collection=collection)
    return raw


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies)
def test_any_json_body_gets_an_answer_or_a_clear_error_never_a_500(client, searchable, body):
    response = client.post(
        "/api/v1/collections/handbook/search",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {searchable}",
    )
    assert response.status_code in (200, 400, 403, 404, 409, 422, 429), response.content
    if response.status_code != 200:
        assert set(response.json()["error"]) == {"code", "message"}
