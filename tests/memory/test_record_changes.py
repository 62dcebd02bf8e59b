"""Changing a stored record's tags and validity (`PATCH /records/{kind}/{id}`, the MCP tool
`change_record`, `services.change_record`): only the fields sent change, recall's filters see the
change at once, another agent's record is a 404, and a bad value is refused with nothing written —
on SQLite and PostgreSQL (DATABASE_URL)."""

import pytest

from collections_app.services.agents import create_agent
from memory_app.models import MAX_TAGS, Episode, Memory
from memory_app.schemas import ChangedOut
from memory_app.services import UNCHANGED, change_record
from ragsite.errors import RagsiteError
from tests.collections.test_mcp import call_tool, tool_error
from tests.declared import assert_declared

pytestmark = pytest.mark.django_db

BASE = "/api/v1/memory"


@pytest.fixture
def keyed(client, django_capture_on_commit_callbacks):
    """(agent, raw key, api(method, path, body, key=)) for the agent "changer"; tasks run on commit."""
    agent, raw = create_agent(agent_id="changer")

    def api(method, path, body=None, key=raw):
        headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
        with django_capture_on_commit_callbacks(execute=True):
            if method == "get":
                return client.get(BASE + path, body or {}, **headers)
            return getattr(client, method)(BASE + path, body, content_type="application/json", **headers)

    return agent, raw, api


def _state(kind: str, id: int) -> tuple:
    """What a change may write, read from the database."""
    model = Memory if kind == "mem" else Episode
    row = model.objects.get(pk=id)
    return row.tags, row.valid_from, row.valid_until, row.updated_at, row.text, row.embedding


def _recalled(api, **filters) -> set[str]:
    answer = api("post", "/recall", {"question": "porto lisbon harbour", "most": 10, **filters})
    assert answer.status_code == 200, answer.content
    return {e["text"] for e in answer.json()["excerpts"]}


def test_a_patch_changes_only_the_fields_sent_and_recall_filters_see_it(keyed):
    _agent, _raw, api = keyed
    porto = api(
        "post",
        "/memories",
        {"text": "I live in Porto by the harbour.", "tags": ["home"], "valid_from": "2020-01-01"},
    ).json()["id"]
    lisbon = api("post", "/memories", {"text": "I live in Lisbon now.", "tags": ["home"]}).json()["id"]
    both = {"I live in Porto by the harbour.", "I live in Lisbon now."}
    assert _recalled(api, valid_at="2026-06-01T00:00:00Z", tags=["home"]) == both  # the index is warm
    text_before = _state("mem", porto)[4:]

    # Porto stopped holding: only valid_until is sent; tags and valid_from stay.
    changed = api("patch", f"/records/mem/{porto}", {"valid_until": "2025-09-01T00:00:00+02:00"})
    assert changed.status_code == 200, changed.content
    assert_declared(changed.json(), ChangedOut)
    assert changed.json() | {"updated_at": None} == {
        "id": porto,
        "kind": "mem",
        "tags": ["home"],
        "valid_from": "2020-01-01T00:00:00Z",
        "valid_until": "2025-08-31T22:00:00Z",
        "updated_at": None,
    }
    assert _state("mem", porto)[4:] == text_before  # the text and its vector are not touched
    assert _recalled(api, valid_at="2026-06-01T00:00:00Z") == {"I live in Lisbon now."}
    assert _recalled(api, valid_at="2024-06-01T00:00:00Z") == both

    # Tags replaced whole (trimmed, repeats dropped); null opens valid_from and leaves valid_until.
    changed = api("patch", f"/records/mem/{porto}", {"tags": [" past ", "city", "past"], "valid_from": None})
    assert changed.status_code == 200, changed.content
    record = api("get", f"/records/mem/{porto}").json()
    assert (record["tags"], record["valid_from"], record["valid_until"]) == (
        ["past", "city"],
        None,
        "2025-08-31T22:00:00Z",
    )
    assert _recalled(api, tags=["home"]) == {"I live in Lisbon now."}
    assert _recalled(api, tags=["past"]) == {"I live in Porto by the harbour."}
    # null (or []) removes every tag; null valid_until opens the end again.
    assert api("patch", f"/records/mem/{porto}", {"tags": None, "valid_until": None}).status_code == 200
    assert api("patch", f"/records/mem/{lisbon}", {"tags": []}).status_code == 200
    assert _state("mem", porto)[:3] == ([], None, None)
    assert _state("mem", lisbon)[0] == []
    assert _recalled(api, tags=["home"]) == set()
    assert _recalled(api, valid_at="2026-06-01T00:00:00Z") == both


def test_the_mcp_tool_changes_a_record_as_the_route_does(client, keyed):
    _agent, raw, api = keyed
    episode = api("post", "/episodes", {"text": "A week in Lisbon.", "tags": ["travel"]}).json()["id"]
    result = call_tool(
        client, raw, "change_record", {"kind": "ep", "id": episode, "valid_until": "2026-03-01T00:00:00Z"}
    )
    assert result.get("isError") is not True, result
    answer = result["structuredContent"]
    assert_declared(answer, ChangedOut)
    assert (answer["tags"], answer["valid_from"], answer["valid_until"]) == (
        ["travel"],
        None,
        "2026-03-01T00:00:00+00:00",
    )
    read = call_tool(client, raw, "read_record", {"kind": "ep", "id": episode})["structuredContent"]
    assert read["valid_until"] == "2026-03-01T00:00:00+00:00" and read["tags"] == ["travel"]
    result = call_tool(client, raw, "change_record", {"kind": "ep", "id": episode, "tags": None})
    assert result["structuredContent"]["tags"] == [] and _state("ep", episode)[0] == []


def test_another_agents_record_cannot_be_changed_and_answers_404(client, keyed):
    _agent, raw, api = keyed
    _other, other_raw = create_agent(agent_id="intruder")
    mine = api("post", "/memories", {"text": "a private fact", "tags": ["mine"]}).json()["id"]
    before = _state("mem", mine)
    for path in (f"/records/mem/{mine}", f"/records/ep/{mine}", f"/records/mem/{mine + 1000}"):
        answer = api("patch", path, {"tags": ["stolen"]}, key=other_raw)
        assert answer.status_code == 404, answer.content
        assert answer.json()["error"]["code"] == "unknown_record"
    # The owner, asking for a record that does not exist, gets the same answer as the intruder.
    missing = api("patch", f"/records/mem/{mine + 1000}", {"tags": ["x"]})
    assert missing.status_code == 404 and missing.json() == answer.json()
    error = tool_error(
        call_tool(client, other_raw, "change_record", {"kind": "mem", "id": mine, "tags": ["x"]})
    )
    assert error["code"] == "unknown_record"
    assert _state("mem", mine) == before


BAD_CHANGES = [
    ({}, "empty_change"),
    ({"tags": "home"}, None),
    ({"tags": [f"t{i}" for i in range(MAX_TAGS + 1)]}, None),
    ({"tags": ["x" * 65]}, None),
    ({"tags": ["   "]}, "invalid_tags"),
    ({"tags": ["tab\there"]}, "invalid_tags"),
    ({"tags": ["ok"], "valid_from": "2026-02-30T00:00:00"}, "invalid_valid_from"),
    ({"tags": ["ok"], "valid_until": "soon"}, "invalid_valid_until"),
    ({"valid_until": 1700000000}, None),
    ({"valid_until": "9999-12-31T23:59:59-14:00"}, "invalid_valid_until"),
    # Before the stored valid_from (2026-01-10): the validity that would result is refused.
    ({"tags": ["ok"], "valid_until": "2026-01-05T00:00:00Z"}, "invalid_validity"),
    ({"valid_from": "2026-01-20T00:00:00Z", "valid_until": "2026-01-20T00:00:00Z"}, "invalid_validity"),
]


@pytest.mark.parametrize("change, code", BAD_CHANGES, ids=[repr(c)[:40] for c, _ in BAD_CHANGES])
def test_a_bad_change_is_refused_naming_it_and_nothing_is_written(client, keyed, change, code):
    _agent, raw, api = keyed
    id = api("post", "/memories", {"text": "a fact", "tags": ["kept"], "valid_from": "2026-01-10"}).json()[
        "id"
    ]
    before = _state("mem", id)
    answer = api("patch", f"/records/mem/{id}", change)
    assert answer.status_code == 400, answer.content
    error = answer.json()["error"]
    assert error["code"] in (code, "invalid_request"), error
    assert any(name in error["message"] for name in change) or not change, error
    error = tool_error(call_tool(client, raw, "change_record", {"kind": "mem", "id": id, **change}))
    assert error["code"] in ("invalid_arguments", code), error
    assert _state("mem", id) == before


def test_an_unknown_field_is_a_422_and_a_text_is_not_changed_by_a_patch(client, keyed):
    _agent, raw, api = keyed
    id = api("post", "/memories", {"text": "a fact", "tags": ["kept"]}).json()["id"]
    before = _state("mem", id)
    for body in ({"text": "another fact"}, {"tags": ["x"], "valid_unti": "2026-01-01"}):
        answer = api("patch", f"/records/mem/{id}", body)
        assert answer.status_code == 422, answer.content
        assert tool_error(call_tool(client, raw, "change_record", {"kind": "mem", "id": id, **body}))
    assert api("patch", f"/records/memo/{id}", {"tags": ["x"]}).status_code == 400  # no such kind
    for huge in (2**63, 10**30):  # past any id a store holds: a 4xx, never a 500
        assert api("patch", f"/records/mem/{huge}", {"tags": ["x"]}).status_code in (400, 404)
        assert tool_error(call_tool(client, raw, "change_record", {"kind": "mem", "id": huge, "tags": ["x"]}))
    assert _state("mem", id) == before


def test_a_locked_record_is_refused_with_409_and_left_alone(keyed):
    agent, _raw, api = keyed
    id = api("post", "/memories", {"text": "kept as it is", "tags": ["a"]}).json()["id"]
    Memory.objects.filter(pk=id).update(locked=True)
    before = _state("mem", id)
    answer = api("patch", f"/records/mem/{id}", {"tags": ["b"]})
    assert answer.status_code == 409 and answer.json()["error"]["code"] == "record_locked"
    with pytest.raises(RagsiteError):
        change_record(agent=agent, kind="mem", id=id, valid_until="2030-01-01")
    assert _state("mem", id) == before


def test_the_service_changes_nothing_it_is_not_given(keyed):
    agent, _raw, api = keyed
    id = api("post", "/memories", {"text": "a fact", "tags": ["t"], "valid_until": "2030-01-01"}).json()["id"]
    record = change_record(agent=agent, kind="mem", id=id, valid_from="2020-01-01", tags=UNCHANGED)
    assert record.tags == ["t"] and record.valid_until is not None and record.valid_from is not None
