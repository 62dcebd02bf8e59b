"""Dates at the edges of datetime in memory listing and MCP: a clean 400 (or a tool error naming the
argument), never a 500 or -32603; an offset PostgreSQL cannot hold is read in UTC."""

import base64
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from collections_app.services.agents import create_agent
from memory_app.models import Memory
from tests.collections.test_mcp import call_tool, tool_error

pytestmark = pytest.mark.django_db

BASE = "/api/v1/memory"


@pytest.fixture
def keyed(client):
    agent, raw = create_agent(agent_id="dated")
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    client.post(BASE + "/memories", {"text": "a note"}, content_type="application/json", **headers)
    return agent, raw, headers


def _cursor(when: str, id: int = 1) -> str:
    return base64.urlsafe_b64encode(json.dumps([when, id]).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "query, code",
    [
        ({"since": "9999-12-31T23:59:59-14:00"}, "invalid_since"),
        ({"until": "0001-01-01T00:00:00+14:00"}, "invalid_until"),
        ({"cursor": _cursor("9999-12-31T23:59:59-14:00")}, "invalid_cursor"),
        ({"cursor": _cursor("0001-01-01T00:00:00+14:00")}, "invalid_cursor"),
    ],
)
def test_a_time_with_no_utc_moment_is_a_400_naming_it(client, keyed, query, code):
    _agent, _raw, headers = keyed
    response = client.get(BASE + "/memories", query, **headers)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == code


def test_an_offset_postgresql_cannot_hold_is_read_in_utc(client, keyed):
    agent, _raw, headers = keyed
    Memory.objects.filter(agent=agent).update(created_at=timezone.now() - timedelta(days=1))
    late = client.get(BASE + "/memories", {"since": "9481-02-09T19:41:29-21:31"}, **headers)
    assert late.status_code == 200 and late.json()["records"] == []
    early = client.get(BASE + "/memories", {"since": "1970-01-01T00:00:00-21:31"}, **headers)
    assert early.status_code == 200 and len(early.json()["records"]) == 1


@pytest.mark.parametrize(
    "arguments, name",
    [
        ({"since": "2026-02-30T00:00:00"}, "since"),
        ({"until": "2026-13-01T00:00:00"}, "until"),
        ({"since": "9999-12-31T23:59:59-14:00"}, "since"),
        ({"until": "0001-01-01T00:00:00+14:00"}, "until"),
        ({"cursor": _cursor("9999-12-31T23:59:59-14:00")}, "cursor"),
    ],
)
def test_mcp_list_records_refuses_an_impossible_date_as_a_tool_error(client, keyed, arguments, name):
    _agent, raw, _headers = keyed
    error = tool_error(call_tool(client, raw, "list_records", {"kind": "mem", **arguments}))
    assert error["code"] in ("invalid_arguments", f"invalid_{name}") and name in error["message"]


def test_an_import_reads_a_naive_time_as_utc_and_refuses_one_that_does_not_exist(keyed):
    from memory_app.services.records import import_records
    from ragsite.errors import RagsiteError

    agent, _raw, _headers = keyed
    line = {"kind": "mem", "text": "imported", "created_at": "2020-01-01T00:00:00"}
    import_records(agent=agent, lines=[json.dumps(line)])
    imported = Memory.objects.get(agent=agent, text="imported")
    assert imported.created_at.isoformat() == "2020-01-01T00:00:00+00:00"
    for when in ("2026-02-30T00:00:00", "9999-12-31T23:59:59-14:00"):
        with pytest.raises(RagsiteError, match="created_at"):
            import_records(agent=agent, lines=[json.dumps({**line, "created_at": when})])
