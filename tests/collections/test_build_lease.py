"""A stale build never commits: the lease (build id + generation) checked inside the committing
transaction, heartbeats during one long document, and the scheduled sweep.

The review reproduced the overwrite 3 of 3 times (docs/decisions/0019): a build the sweep had marked
failed went on, committed its older content over the newer build, resurrected deleted documents and flipped
its own history from failed to succeeded.
"""

import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from collections_app.models import BuildRun, Document, Paragraph
from collections_app.schedules import SWEEP_STALE_BUILDS, SWEEP_STALE_BUILDS_FUNC, ensure_schedules
from collections_app.services.agents import create_collection
from collections_app.services.builds import (
    STALE_MESSAGE,
    build_collection,
    fail_stale_builds,
    request_build,
    run_build,
)
from collections_app.services.search import search_collection
from collections_app.tasks import sweep_stale_builds
from tests.shared.test_embedders_http import FakeEmbeddingServer, Scripted


def _later(settings):
    """A moment at which any heartbeat written now is stale."""
    return timezone.now() + timedelta(seconds=int(settings.BUILD_HEARTBEAT_TIMEOUT) + 1)


def _texts(collection):
    return " ".join(Paragraph.objects.filter(collection=collection).values_list("text", flat=True))


@pytest.mark.django_db
def test_a_build_failed_by_the_sweep_never_commits_over_the_newer_build(agent, knowledge_folder, settings):
    collection = create_collection(agent=agent, name="race", method="fixed", size=200)
    folder = knowledge_folder(
        "race", {"good.md": "The answer is SEVENTEEN.", "slow.md": "A long document. " * 40}
    )
    fired = []

    def meanwhile(run):
        # The slow build A has read and embedded everything and is about to commit. Meanwhile its
        # heartbeat went stale, the sweep failed it, the folder changed and build B succeeded.
        if fired or not run.paragraphs_total or run.paragraphs_done < run.paragraphs_total:
            return
        fired.append(run.pk)
        assert fail_stale_builds(now=_later(settings)) == 1
        (folder / "good.md").write_text("The answer is NINETY.")
        (folder / "slow.md").unlink()
        assert build_collection(collection=collection).status == BuildRun.SUCCEEDED

    a = request_build(collection=collection, enqueue=False)
    run_build(a.pk, report=meanwhile)

    assert fired == [a.pk]
    a.refresh_from_db()
    assert a.status == BuildRun.FAILED and a.error == STALE_MESSAGE  # history keeps the sweep's verdict
    assert "NINETY" in _texts(collection) and "SEVENTEEN" not in _texts(collection)
    assert not Document.objects.filter(collection=collection, name="slow.md").exists()  # not resurrected
    answer = search_collection(agent=agent, collection="race", question="what is the answer", min_score=0)
    assert "NINETY" in " ".join(p["text"] for p in answer["paragraphs"])


@pytest.mark.django_db
def test_a_build_that_lost_its_lease_between_documents_stops_there(agent, knowledge_folder, settings):
    collection = create_collection(agent=agent, name="early", method="fixed", size=200)
    knowledge_folder("early", {f"doc{i}.md": f"Document number {i} says hello." for i in range(5)})

    def sweep_after_first(run):
        if run.documents_done == 1:
            fail_stale_builds(now=_later(settings))

    a = request_build(collection=collection, enqueue=False)
    run_build(a.pk, report=sweep_after_first)
    a.refresh_from_db()
    assert a.status == BuildRun.FAILED and a.documents_done < 5
    assert not Paragraph.objects.filter(collection=collection).exists()


@pytest.mark.django_db
def test_a_newer_generation_takes_the_lease_from_a_running_build(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="gen", method="fixed", size=200)
    knowledge_folder("gen", {"a.md": "Alpha text here."})
    a = request_build(collection=collection, enqueue=False)
    # What a second scheduler, or a person resetting a row by hand, could do: A's status is left
    # alone but the collection's generation moves on. A must not commit.
    BuildRun.objects.filter(pk=a.pk).update(status=BuildRun.FAILED)
    newer = request_build(collection=collection, enqueue=False)
    BuildRun.objects.filter(pk=a.pk).update(status=BuildRun.QUEUED)
    BuildRun.objects.filter(pk=newer.pk).update(status=BuildRun.FAILED)
    run_build(a.pk)
    a.refresh_from_db()
    assert a.status == BuildRun.FAILED and "newer build" in a.error
    assert not Paragraph.objects.filter(collection=collection).exists()


@pytest.mark.django_db(transaction=True)
def test_heartbeats_go_on_during_one_slow_embedding_batch(agent, knowledge_folder, settings):
    embedder = FakeEmbeddingServer()
    serving = threading.Thread(target=embedder.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    serving.start()
    settings.EMBED_BACKEND, settings.EMBED_URL, settings.EMBED_MODEL = "http", embedder.url, "slow-embed"
    settings.EMBED_TIMEOUT, settings.BUILD_HEARTBEAT_TIMEOUT = 10.0, 1
    # Every embedding request takes 2.5 s: two heartbeat timeouts with no progress to report.
    embedder.script("/v1/embeddings", *[Scripted(delay=2.5) for _ in range(4)])
    collection = create_collection(agent=agent, name="slowembed", method="fixed", size=200)
    knowledge_folder("slowembed", {"one.md": "Only one paragraph, embedded slowly."})
    swept: list[int] = []
    stop = threading.Event()

    def sweeper():
        from django.db import connections

        try:
            while not stop.wait(0.3):
                swept.append(fail_stale_builds())
        finally:
            connections.close_all()

    thread = threading.Thread(target=sweeper)
    thread.start()
    try:
        started = time.monotonic()
        run = build_collection(collection=collection)
        elapsed = time.monotonic() - started
    finally:
        stop.set()
        thread.join(timeout=30)
        embedder.shutdown()
        embedder.server_close()
    assert elapsed > 2.5 and len(swept) > 5
    assert run.status == BuildRun.SUCCEEDED, run.error
    assert sum(swept) == 0


@pytest.mark.django_db
def test_the_sweep_is_a_schedule_made_by_migrate_and_it_fails_dead_builds(agent, knowledge_folder, settings):
    from django_q.models import Schedule

    assert ensure_schedules() == []  # migrate already made it
    schedule = Schedule.objects.get(name=SWEEP_STALE_BUILDS)
    assert schedule.func == SWEEP_STALE_BUILDS_FUNC and schedule.minutes == 1
    Schedule.objects.filter(pk=schedule.pk).delete()
    assert ensure_schedules() == [SWEEP_STALE_BUILDS] and ensure_schedules() == []

    collection = create_collection(agent=agent, name="dead", method="fixed", size=200)
    knowledge_folder(
        "dead", {"a.md": "# A\n\nText.\n"}
    )  # a build with no source is refused before it is queued
    dead = request_build(collection=collection, enqueue=False)
    BuildRun.objects.filter(pk=dead.pk).update(
        status=BuildRun.RUNNING,
        heartbeat_at=timezone.now() - timedelta(seconds=settings.BUILD_HEARTBEAT_TIMEOUT + 5),
    )
    assert sweep_stale_builds() == 1
    dead.refresh_from_db()
    assert dead.status == BuildRun.FAILED and dead.error == STALE_MESSAGE
