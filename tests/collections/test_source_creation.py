"""Each remote source is created from each of the three places people and agents set one (issue 41,
"Done when"): the admin (its Collection sources form, through Django's test client), the JSON API
(`POST /api/v1/collections` with a `source`) and MCP (the `set_source` tool, then its `build` tool).
Every source is a real server on loopback holding the handbook; the collection built from it answers."""

import json

import pytest

from collections_app.models import Agent, BuildRun, CollectionSource
from collections_app.services import origins
from collections_app.services.agents import create_agent, create_collection, get_collection
from collections_app.services.builds import build_collection, run_build
from tests.collections.sources_servers import texts
from tests.collections.test_mcp import call_tool

pytestmark = pytest.mark.django_db
KINDS = ["git", "s3", "webdav", "web"]


@pytest.fixture
def raw(db):
    return create_agent(agent_id="alpha", name="Alpha")[1]


def answers(collection) -> bool:
    return "0.42 per kilometre" in texts(collection, "mileage per kilometre")


def shown_no_secret(text: str, credentials: dict) -> bool:
    secrets = [credentials[key] for key in ("password", "secret_access_key", "token") if key in credentials]
    return not any(secret in text for secret in secrets)


@pytest.mark.parametrize("kind", KINDS)
def test_a_source_set_in_the_admin_builds(kind, raw, remote_handbook, admin_client):
    settings, credentials = remote_handbook(kind)
    collection = create_collection(
        agent=Agent.objects.get(agent_id="alpha"), name="handbook", method="fixed", size=80
    )
    added = admin_client.post(
        "/admin/collections_app/collectionsource/add/",
        {
            "collection": collection.pk,
            "kind": kind,
            "settings_json": json.dumps(settings),
            "credentials_json": json.dumps(credentials) if credentials else "",
        },
    )
    assert added.status_code == 302, added.content.decode()[:3000]
    source = CollectionSource.objects.get(collection=collection)
    assert source.kind == kind and bool(source.credentials) is bool(credentials)
    if credentials:
        assert origins.origin_of(collection).credentials == credentials
    page = admin_client.get(f"/admin/collections_app/collectionsource/{source.pk}/change/").content.decode()
    assert shown_no_secret(page, credentials)
    run = build_collection(collection=collection)
    assert run.status == BuildRun.SUCCEEDED, run.error
    assert answers(collection)


@pytest.mark.parametrize("kind", KINDS)
def test_a_collection_created_through_the_api_with_a_source_builds(kind, raw, remote_handbook, client):
    settings, credentials = remote_handbook(kind)
    headers = {"Authorization": f"Bearer {raw}"}
    body = {"name": "handbook", "method": "fixed", "source": {"kind": kind, "settings": settings}}
    if credentials:
        body["source"]["credentials"] = credentials
    created = client.post(
        "/api/v1/collections", data=json.dumps(body), content_type="application/json", headers=headers
    )
    assert created.status_code == 201, created.content
    assert created.json()["source"]["kind"] == kind
    assert created.json()["source"]["credentials"] is bool(credentials)
    assert shown_no_secret(created.content.decode(), credentials)
    queued = client.post("/api/v1/collections/handbook/build", headers=headers)
    assert queued.status_code == 202, queued.content
    assert run_build(queued.json()["build"]).status == BuildRun.SUCCEEDED
    assert answers(get_collection(agent=Agent.objects.get(agent_id="alpha"), name="handbook"))


@pytest.mark.parametrize("kind", KINDS)
def test_a_source_set_through_mcp_builds_through_mcp(
    kind, raw, remote_handbook, client, django_capture_on_commit_callbacks
):
    settings, credentials = remote_handbook(kind)
    agent = Agent.objects.get(agent_id="alpha")
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    arguments = {"collection": "handbook", "kind": kind, "settings": settings}
    if credentials:
        arguments["credentials"] = credentials
    result = call_tool(client, raw, "set_source", arguments)
    assert result.get("isError") is not True, result
    assert result["structuredContent"]["kind"] == kind
    assert result["structuredContent"]["credentials"] is bool(credentials)
    assert shown_no_secret(json.dumps(result), credentials)
    with django_capture_on_commit_callbacks(execute=True):  # the queued build runs at once (Conf.SYNC)
        built = call_tool(client, raw, "build", {"collection": "handbook"})
    assert built.get("isError") is not True, built
    run = BuildRun.objects.get(pk=built["structuredContent"]["build"])
    assert run.status == BuildRun.SUCCEEDED, run.error
    assert answers(collection)


def test_a_setting_of_the_wrong_type_is_one_sentence_and_a_number_may_be_a_number(raw, client):
    """An agent writes JSON: `max_pages: 50` is taken, and a wrong shape is named by the kind's own rule,
    not by one pydantic error per member of a union."""
    headers = {"Authorization": f"Bearer {raw}"}

    def created(name: str, kind: str, settings: dict):
        body = {"name": name, "method": "fixed", "source": {"kind": kind, "settings": settings}}
        return client.post(
            "/api/v1/collections", data=json.dumps(body), content_type="application/json", headers=headers
        )

    site = {"start_url": "http://127.0.0.1:9/", "max_pages": 50, "max_depth": 3}
    assert created("site", "web", site).status_code in (200, 201)
    stored = CollectionSource.objects.get(collection__name="site").settings
    assert (stored["max_pages"], stored["max_depth"]) == ("50", "3")

    rules = {"url": "git://127.0.0.1:9/docs.git", "reader_rules": {"path": "hr/**", "readers": ["hr"]}}
    refused = created("repo", "git", rules)
    assert refused.status_code == 400  # invalid_source, as every other wrong setting
    message = json.dumps(refused.json())
    assert "reader_rules are a list of" in message
    assert "valid string" not in message and "valid boolean" not in message
    assert not CollectionSource.objects.filter(collection__name="repo").exists()
