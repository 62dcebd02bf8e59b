"""Folder sync after a build that failed for a reason that may pass: built again later, with backoff."""

from datetime import timedelta

import pytest
from django.db import OperationalError
from django.utils import timezone

from collections_app.models import BuildRun, CollectionSync
from collections_app.services import sync, sync_check
from collections_app.services.agents import create_collection
from collections_app.services.leases import fail_stale_builds
from collections_app.services.search import search_collection
from tests.conftest import HANDBOOK

pytestmark = pytest.mark.django_db

CANTEEN = "# Canteen\n\nThe canteen serves lunch from noon until two.\n"


@pytest.fixture
def synced(agent, knowledge_folder):
    folder = knowledge_folder("handbook", HANDBOOK)
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    sync.set_sync(collection=collection, every=5)
    collection.folder_path = folder
    return collection


def _check(collection, capture, *, now=None, run: bool = True) -> sync_check.Check:
    """A check as the task runs it; ``run`` False: its build is queued but no worker ever takes it."""
    with capture(execute=run):
        found = sync_check.check_source(collection=collection, now=now)
    if found.build is not None:
        found.build.refresh_from_db()
    return found


def _answers(collection, question: str) -> str:
    answer = search_collection(agent=collection.agent, collection=collection, question=question, min_score=0)
    return " ".join(p["text"] for p in answer["paragraphs"])


def test_a_sync_build_whose_worker_died_is_built_again_after_a_growing_wait(
    synced, django_capture_on_commit_callbacks, settings
):
    settings.SYNC_RETRY_SECONDS, settings.SYNC_RETRY_LIMIT = 60, 2
    assert _check(synced, django_capture_on_commit_callbacks).build.status == BuildRun.SUCCEEDED
    (synced.folder_path / "canteen.md").write_text(CANTEEN)
    killed = _check(synced, django_capture_on_commit_callbacks, run=False).build
    # The worker was killed: no heartbeat, and the sweep fails the build.
    BuildRun.objects.filter(pk=killed.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert fail_stale_builds() == 1
    killed.refresh_from_db()
    assert (killed.status, killed.transient) == (BuildRun.FAILED, True)

    start = timezone.now()
    waiting = _check(synced, django_capture_on_commit_callbacks, now=start)
    assert waiting.build is None and waiting.retry_pending
    assert f"build {killed.pk} of this state failed" in waiting.outcome
    assert "retry 1 of 2 pending" in waiting.outcome
    state = CollectionSync.objects.get(collection=synced)
    assert state.retry_at == start + timedelta(seconds=60)
    assert sync.describe(synced)["retry_at"] == state.retry_at
    # The next check is due when the retry is, not a whole period later.
    assert state.next_check_at == state.retry_at
    assert "noon until two" not in _answers(synced, "when does the canteen serve lunch")

    # Still waiting half way; at the retry time the folder's state is built again and goes live.
    assert _check(synced, django_capture_on_commit_callbacks, now=start + timedelta(seconds=30)).build is None
    retried = _check(synced, django_capture_on_commit_callbacks, now=start + timedelta(seconds=61))
    assert retried.build is not None and retried.build.status == BuildRun.SUCCEEDED
    assert f"retry 1 of 2, after build {killed.pk} failed" in retried.outcome
    assert "noon until two" in _answers(synced, "when does the canteen serve lunch")
    assert _check(synced, django_capture_on_commit_callbacks).outcome == "unchanged"
    assert CollectionSync.objects.get(collection=synced).retries == 0


def test_retries_wait_twice_as_long_each_time_and_stop_at_the_limit(
    synced, django_capture_on_commit_callbacks, settings, monkeypatch
):
    settings.SYNC_RETRY_SECONDS, settings.SYNC_RETRY_LIMIT = 60, 2
    _check(synced, django_capture_on_commit_callbacks)
    (synced.folder_path / "canteen.md").write_text(CANTEEN)

    def locked(*_args, **_kwargs):
        raise OperationalError("database is locked")

    # Every build of the new state meets a locked store.
    monkeypatch.setattr("collections_app.services.builds._build", locked)
    first = _check(synced, django_capture_on_commit_callbacks).build
    assert (first.status, first.transient) == (BuildRun.FAILED, True)
    t0 = timezone.now()
    _check(synced, django_capture_on_commit_callbacks, now=t0)
    second = _check(synced, django_capture_on_commit_callbacks, now=t0 + timedelta(seconds=60)).build
    assert second is not None and second.status == BuildRun.FAILED
    t1 = t0 + timedelta(seconds=61)
    waiting = _check(synced, django_capture_on_commit_callbacks, now=t1)
    assert "retry 2 of 2 pending" in waiting.outcome
    assert CollectionSync.objects.get(collection=synced).retry_at == t1 + timedelta(seconds=120)
    third = _check(synced, django_capture_on_commit_callbacks, now=t1 + timedelta(seconds=120)).build
    assert third is not None and third.status == BuildRun.FAILED
    done = _check(synced, django_capture_on_commit_callbacks, now=t1 + timedelta(days=1))
    assert done.build is None and "not built again" in done.outcome and "after 2 retries" in done.outcome
    assert BuildRun.objects.filter(collection=synced).count() == 4  # the first build and three tries


def test_a_failure_that_will_not_pass_is_not_retried(synced, django_capture_on_commit_callbacks, monkeypatch):
    _check(synced, django_capture_on_commit_callbacks)
    (synced.folder_path / "canteen.md").write_text(CANTEEN)

    def broken(*_args, **_kwargs):
        raise ValueError("a bug, not a passing fault")

    monkeypatch.setattr("collections_app.services.builds._build", broken)
    failed = _check(synced, django_capture_on_commit_callbacks).build
    assert (failed.status, failed.transient) == (BuildRun.FAILED, False)
    later = _check(synced, django_capture_on_commit_callbacks, now=timezone.now() + timedelta(days=1))
    assert later.build is None and f"not built again: build {failed.pk} of this state failed" in later.outcome
    assert not later.retry_pending
