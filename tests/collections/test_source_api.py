"""Sources through the JSON API: a collection created to read a git repository (a real git daemon on
loopback) builds from it; a source changed with PUT; credentials taken, never answered."""

import json

import pytest

from collections_app.models import BuildRun
from collections_app.services.agents import create_agent

pytestmark = pytest.mark.django_db


@pytest.fixture
def served(remote_handbook):
    """The handbook in a git repository under handbook/, served by a real git daemon: its URL."""
    return remote_handbook("git")[0]["url"]


@pytest.fixture
def raw(db):
    return create_agent(agent_id="alpha", name="Alpha")[1]


def call(client, method, path, raw, body=None):
    return getattr(client, method)(
        f"/api/v1/collections{path}",
        data=json.dumps(body) if body is not None else None,
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
    )


def test_a_collection_created_with_a_git_source_builds_from_it(client, raw, served):
    source = {
        "kind": "git",
        "settings": {"url": served, "branch": "main", "path": "handbook"},
        "credentials": {"token": "tok-very-secret"},
    }
    created = call(client, "post", "", raw, {"name": "handbook", "method": "fixed", "source": source})
    assert created.status_code == 201, created.content
    answer = created.json()
    assert answer["source"] == {
        "kind": "git",
        "settings": {"url": served, "branch": "main", "path": "handbook"},
        "credentials": True,
    }
    assert "tok-very-secret" not in created.content.decode()
    assert answer["sync"]["sync_every"] == 5  # a remote source keeps itself in sync, as a folder does
    queued = call(client, "post", "/handbook/build", raw)
    assert queued.status_code == 202, queued.content
    from collections_app.services.builds import run_build

    assert run_build(queued.json()["build"]).status == BuildRun.SUCCEEDED
    found = call(
        client, "post", "/handbook/search", raw, {"question": "mileage per kilometre", "min_score": 0}
    )
    assert "0.42 per kilometre" in " ".join(p["text"] for p in found.json()["paragraphs"])
    listed = call(client, "get", "/handbook", raw)
    assert "tok-very-secret" not in listed.content.decode() and listed.json()["source"]["credentials"] is True


def test_put_source_changes_it_and_refuses_what_it_cannot_take(client, raw, served):
    assert call(client, "post", "", raw, {"name": "handbook"}).status_code == 201
    assert call(client, "get", "/handbook", raw).json()["source"] == {
        "kind": "folder",
        "settings": {},
        "credentials": False,
    }
    changed = call(client, "put", "/handbook/source", raw, {"kind": "git", "settings": {"url": served}})
    assert changed.status_code == 200 and changed.json()["source"]["settings"]["branch"] == "main"
    for body, code in [
        ({"kind": "git", "settings": {"url": "file:///etc"}}, "invalid_source"),
        ({"kind": "git", "settings": {"url": "https://192.0.2.5/x.git"}}, "invalid_source"),
        ({"kind": "web", "settings": {"url": "https://127.0.0.1/"}}, "invalid_source"),
        ({"kind": "s3", "settings": {"bucket": "b" * 70}}, "invalid_source"),
    ]:
        refused = call(client, "put", "/handbook/source", raw, body)
        assert refused.status_code == 400 and refused.json()["error"]["code"] == code, body
    unknown_kind = call(client, "put", "/handbook/source", raw, {"kind": "ftp"})
    assert unknown_kind.status_code == 400
    back = call(client, "put", "/handbook/source", raw, {"kind": "folder"})
    assert back.json()["source"]["kind"] == "folder"
    _other, other_raw = create_agent(agent_id="beta", name="Beta")
    assert call(client, "put", "/handbook/source", other_raw, {"kind": "folder"}).status_code == 404


def test_a_folder_beside_a_remote_source_is_refused(client, raw, served):
    body = {"name": "both", "folder": "x", "source": {"kind": "git", "settings": {"url": served}}}
    refused = call(client, "post", "", raw, body)
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "invalid_source"


def test_the_mcp_tool_sets_a_source_and_a_build_reads_it(client, raw, served):
    from collections_app.models import Agent
    from collections_app.services.agents import create_collection, get_collection
    from collections_app.services.builds import build_collection
    from tests.collections.test_mcp import call_tool, tool_error

    create_collection(agent=Agent.objects.get(agent_id="alpha"), name="handbook", method="fixed", size=80)
    arguments = {
        "collection": "handbook",
        "kind": "git",
        "settings": {"url": served, "path": "handbook"},
        "credentials": {"username": "reader", "password": "pw-very-secret"},
    }
    result = call_tool(client, raw, "set_source", arguments)
    assert result.get("isError") is not True, result
    assert result["structuredContent"] == {
        "kind": "git",
        "settings": {"url": served, "branch": "main", "path": "handbook"},
        "credentials": True,
    }
    assert "pw-very-secret" not in json.dumps(result)
    collection = get_collection(agent=Agent.objects.get(agent_id="alpha"), name="handbook")
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    refused = call_tool(client, raw, "set_source", {**arguments, "settings": {"url": "file:///etc"}})
    assert tool_error(refused)["code"] == "invalid_source"
