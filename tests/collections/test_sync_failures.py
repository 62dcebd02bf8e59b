"""A sync check that fails is never silent: its outcome is on the collection (API and admin) and the agent's
hooks hear `sync.failed` once per run of failures; a sidecar with a hostile number no longer fails it."""

import json
import shutil

import pytest

from collections_app.models import CollectionSync, Webhook, WebhookDelivery
from collections_app.services import sync, sync_check, webhooks
from collections_app.services.agents import create_collection
from tests.collections.test_webhooks import verified
from tests.conftest import HANDBOOK
from tests.servers import WebhookReceiver, serving

pytestmark = pytest.mark.django_db


@pytest.fixture
def receiver(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    with serving(WebhookReceiver()) as server:
        yield server


@pytest.fixture
def synced(agent, knowledge_folder):
    folder = knowledge_folder("synced", HANDBOOK)
    collection = create_collection(agent=agent, name="synced", method="fixed", size=80)
    sync.set_sync(collection=collection, every=5)
    return collection, folder


def test_a_sidecar_with_a_huge_number_does_not_fail_the_check(synced, django_capture_on_commit_callbacks):
    collection, folder = synced
    (folder / "leave.md.meta.json").write_text('{"year": 1' + "0" * 400 + "}")
    with django_capture_on_commit_callbacks(execute=True):
        check = sync_check.check_source(collection=collection)
    assert check.build is not None and "new" in check.outcome
    assert not check.outcome.startswith(sync_check.CHECK_FAILED)


def test_a_failing_check_is_shown_and_told_once(
    agent, synced, receiver, monkeypatch, client, admin_client, django_capture_on_commit_callbacks
):
    collection, folder = synced
    registered = Webhook.objects.create(
        agent=agent, url=webhooks.validate_url(receiver.url), events=[Webhook.SYNC_FAILED]
    )

    def check():
        with django_capture_on_commit_callbacks(execute=True):
            return sync_check.check_source(collection=collection)

    # A fault in the middle of the check (a disk error while listing, say).
    def broken(*args, **kwargs):
        raise OSError(5, "Input/output error", str(folder))

    with monkeypatch.context() as patched:
        patched.setattr(sync_check, "_scan", broken)
        failed = check()
        again = check()
    assert failed.outcome.startswith("the check failed (OSError)")
    assert CollectionSync.objects.get(collection=collection).last_outcome == failed.outcome
    [request] = receiver.requests
    payload = verified(request, registered.secret)
    assert payload["event"] == "sync.failed"
    assert payload["data"]["collection"] == "synced" and payload["data"]["sync"]["reason"] == "OSError"
    assert str(folder) not in request["body"].decode()
    # Shown on the collection's admin page.
    page = admin_client.get(f"/admin/collections_app/collection/{collection.pk}/change/").content.decode()
    assert "the check failed (OSError)" in page and str(folder) not in page
    # Failing again is not told again; a check that works and then a failure is.
    assert again.outcome == failed.outcome and len(receiver.requests) == 1
    assert not check().outcome.startswith(sync_check.CHECK_FAILED)
    shutil.rmtree(folder)
    gone = check()
    assert gone.outcome.startswith(sync_check.UNREADABLE)
    assert len(receiver.requests) == 2
    assert json.loads(receiver.requests[1]["body"])["data"]["sync"]["reason"]
    assert WebhookDelivery.objects.filter(event="sync.failed").count() == 2


def test_a_file_too_large_to_read_is_not_changed_at_every_check(synced, django_capture_on_commit_callbacks):
    from collections_app.services.sources import MAX_DOCUMENT_BYTES

    collection, folder = synced
    with (folder / "huge.md").open("wb") as handle:  # sparse: no disk is written
        handle.truncate(MAX_DOCUMENT_BYTES + 1)

    def check():
        with django_capture_on_commit_callbacks(execute=True):
            return sync_check.check_source(collection=collection)

    first = check()
    assert first.build is not None
    first.build.refresh_from_db()
    assert first.build.status == "succeeded" and "huge.md was refused (too large)" in " ".join(
        first.build.warnings
    )
    for _ in range(2):
        again = check()
        assert again.outcome == "unchanged", again.outcome  # was "1 changed; not built again: …"
    with (folder / "huge.md").open("ab") as handle:  # it grew: a change, read once more
        handle.truncate(MAX_DOCUMENT_BYTES + 2)
    assert check().changed == ["huge.md"]
