"""Setting a collection to sync through the API and the management command (issue 26)."""

import json
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from collections_app.models import CollectionSync
from collections_app.services.agents import create_agent, create_collection

pytestmark = pytest.mark.django_db

LEAVE = {"leave.md": "# Leave\n\nCarry-over of annual leave is capped at five days a year.\n"}


@pytest.fixture
def caller(client):
    agent, raw = create_agent(agent_id="helpdesk")

    def call(method, path, body=None):
        kwargs = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
        if body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        return getattr(client, method)(f"/api/v1{path}", **kwargs)

    call.agent = agent
    return call


def test_a_collection_created_with_sync_every_shows_its_sync_fields(caller, knowledge_root):
    knowledge_root("helpdesk", "hr-share", LEAVE)
    created = caller("post", "/collections", {"name": "handbook", "folder": "hr-share", "sync_every": 10})
    assert created.status_code == 201, created.content
    shown = created.json()["sync"]
    assert (
        shown["sync_every"] == 10 and shown["last_checked_at"] is None and shown["next_check_at"] is not None
    )
    assert shown["outcome"] == "" and shown["build"] is None
    assert caller("get", "/collections/handbook").json()["sync"] == shown
    plain = caller("post", "/collections", {"name": "plain", "folder": "hr-share", "sync_every": None})
    assert plain.json()["sync"] is None


def test_a_folder_collection_syncs_by_default_at_sync_every(caller, knowledge_root, settings):
    knowledge_root("helpdesk", "hr-share", LEAVE)
    settings.SYNC_EVERY = 4
    followed = caller("post", "/collections", {"name": "followed", "folder": "hr-share"}).json()
    assert followed["sync"]["sync_every"] == 4 and followed["sync"]["changed_since_build"] is False
    # Uploads only: nothing to follow; and SYNC_EVERY 0 turns the default off.
    assert caller("post", "/collections", {"name": "uploads"}).json()["sync"] is None
    settings.SYNC_EVERY = 0
    assert caller("post", "/collections", {"name": "asked", "folder": "hr-share"}).json()["sync"] is None


def test_the_command_syncs_a_folder_by_default_and_no_sync_turns_it_off(agent, knowledge_root, settings):
    knowledge_root(agent.agent_id, "kept", LEAVE)
    knowledge_root(agent.agent_id, "asked", LEAVE)
    call_command("create_collection", agent.agent_id, "kept", "--folder", "kept", stdout=StringIO())
    call_command(
        "create_collection", agent.agent_id, "asked", "--folder", "asked", "--no-sync", stdout=StringIO()
    )
    assert CollectionSync.objects.get(collection__name="kept").every == settings.SYNC_EVERY == 5
    assert not CollectionSync.objects.filter(collection__name="asked").exists()


def test_put_sync_sets_changes_and_stops_syncing(caller, knowledge_root):
    knowledge_root("helpdesk", "hr-share", LEAVE)
    caller("post", "/collections", {"name": "handbook", "folder": "hr-share"})
    answer = caller("put", "/collections/handbook/sync", {"sync_every": 30})
    assert answer.status_code == 200 and answer.json()["sync"]["sync_every"] == 30
    assert caller("put", "/collections/handbook/sync", {"sync_every": 5}).json()["sync"]["sync_every"] == 5
    stopped = caller("put", "/collections/handbook/sync", {"sync_every": None})
    assert stopped.status_code == 200 and stopped.json()["sync"] is None
    assert not CollectionSync.objects.get().enabled


@pytest.mark.parametrize(
    "body, status",
    [
        ({"sync_every": 0}, 400),
        ({"sync_every": 10081}, 400),
        ({"sync_every": "5"}, 400),
        ({"sync_every": 2.5}, 400),
        ({"sync_every": True}, 400),
        ({}, 400),
        ({"sync_every": 5, "x": 1}, 422),
    ],
)
def test_a_bad_sync_period_is_refused_in_the_error_shape_and_writes_nothing(
    caller, knowledge_root, body, status
):
    knowledge_root("helpdesk", "hr-share", LEAVE)
    caller("post", "/collections", {"name": "handbook", "folder": "hr-share", "sync_every": None})
    answer = caller("put", "/collections/handbook/sync", body)
    assert answer.status_code == status and set(answer.json()["error"]) == {"code", "message"}
    assert not CollectionSync.objects.exists()


def test_another_agents_collection_answers_404(caller, knowledge_root):
    other, _raw = create_agent(agent_id="other")
    knowledge_root("other", "share", LEAVE)
    create_collection(agent=other, name="theirs", folder="share", sync_every=None)
    answer = caller("put", "/collections/theirs/sync", {"sync_every": 5})
    assert answer.status_code == 404 and answer.json()["error"]["code"]
    assert not CollectionSync.objects.exists()


def test_the_command_sets_checks_and_stops_sync(agent, knowledge_folder):
    knowledge_folder("handbook", LEAVE)
    create_collection(agent=agent, name="handbook", method="fixed", size=80)
    out = StringIO()
    call_command("sync_collection", "alpha", "handbook", "--every", "15", stdout=out)
    assert "every 15 minutes" in out.getvalue()
    out = StringIO()
    call_command("sync_collection", "alpha", "handbook", "--check", "--json", stdout=out)
    checked = json.loads(out.getvalue())
    assert checked["new"] == ["leave.md"] and checked["build"] is not None
    assert checked["outcome"].endswith("queued")
    out = StringIO()
    call_command("sync_collection", "alpha", "handbook", "--off", stdout=out)
    assert "no longer syncs" in out.getvalue() and not CollectionSync.objects.get().enabled
    with pytest.raises(CommandError):
        call_command("sync_collection", "alpha", "handbook", "--every", "0")


def test_create_collection_takes_sync_every(agent, knowledge_folder):
    knowledge_folder("synced", LEAVE)
    call_command("create_collection", "alpha", "synced", "--sync-every", "20", stdout=StringIO())
    assert CollectionSync.objects.get(collection__name="synced").every == 20
