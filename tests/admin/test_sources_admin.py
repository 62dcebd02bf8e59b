"""Collection sources in the admin: staff set a git source with credentials that are sealed and never
shown again; a setting the server does not allow is an error on the form, and nothing is saved."""

import pytest

from collections_app.models import CollectionSource
from collections_app.services import origins
from collections_app.services.agents import create_collection

pytestmark = pytest.mark.django_db


@pytest.fixture
def collection(agent, settings):
    settings.SOURCE_ALLOWED_HOSTS = []
    return create_collection(agent=agent, name="handbook")


def test_staff_set_a_git_source_whose_credentials_are_never_shown(admin_client, collection):
    added = admin_client.post(
        "/admin/collections_app/collectionsource/add/",
        {
            "collection": collection.pk,
            "kind": "git",
            "settings_json": '{"url": "git://127.0.0.1:9418/docs.git", "path": "handbook"}',
            "credentials_json": '{"token": "tok-admin-secret"}',
        },
    )
    assert added.status_code == 302, added.content.decode()[:2000]
    source = CollectionSource.objects.get(collection=collection)
    assert source.settings == {"url": "git://127.0.0.1:9418/docs.git", "branch": "main", "path": "handbook"}
    assert origins.origin_of(collection).credentials == {"token": "tok-admin-secret"}
    page = admin_client.get(f"/admin/collections_app/collectionsource/{source.pk}/change/").content.decode()
    assert "tok-admin-secret" not in page and "git://127.0.0.1:9418/docs.git" in page
    listing = admin_client.get("/admin/collections_app/collectionsource/").content.decode()
    assert (
        "the git repository: url git://127.0.0.1:9418/docs.git" in listing
        and "tok-admin-secret" not in listing
    )
    # Saved again with the credentials field empty: they are kept; "clear" removes them.
    admin_client.post(
        f"/admin/collections_app/collectionsource/{source.pk}/change/",
        {"kind": "git", "settings_json": '{"url": "git://127.0.0.1:9418/docs.git"}', "credentials_json": ""},
    )
    assert origins.origin_of(collection).credentials == {"token": "tok-admin-secret"}
    admin_client.post(
        f"/admin/collections_app/collectionsource/{source.pk}/change/",
        {
            "kind": "git",
            "settings_json": '{"url": "git://127.0.0.1:9418/docs.git"}',
            "clear_credentials": "on",
        },
    )
    assert origins.origin_of(collection).credentials == {}


def test_a_setting_the_server_does_not_allow_is_a_form_error(admin_client, collection):
    refused = admin_client.post(
        "/admin/collections_app/collectionsource/add/",
        {"collection": collection.pk, "kind": "git", "settings_json": '{"url": "file:///etc/passwd"}'},
    )
    assert (
        refused.status_code == 200 and "https:// or http:// or git://, not file" in refused.content.decode()
    )
    assert not CollectionSource.objects.exists()
