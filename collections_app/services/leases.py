"""A build's lease on its collection, its heartbeat, and the sweep that fails builds whose worker died.

A build holds its collection's lease from the request until its commit: its id and the
collection's `build_generation` when it was requested. `check_lease` runs inside the
committing transaction with both rows locked, so a build the sweep failed, or one a newer
request superseded, rolls back instead of writing over newer paragraphs (three of
three stale builds had committed before: docs/decisions/0019).
"""

import logging
import threading
from contextlib import nullcontext
from datetime import timedelta

from django.db import connection
from django.utils import timezone

from ragsite.errors import RagsiteError
from ragsite.rls import current_task_agent, task_scope

from ..conf import settings
from ..models import BuildRun, Collection

logger = logging.getLogger("ragsite.builds")

ACTIVE_STATES = (BuildRun.QUEUED, BuildRun.RUNNING)

STALE_MESSAGE = "the build stopped reporting progress (its worker died)"


class LeaseLost(RagsiteError):
    """This build no longer holds its collection's lease: the sweep failed it, or a newer build was
    requested."""

    code = "build_superseded"
    status = 409


def fail_stale_builds(now=None) -> int:
    """A build whose heartbeat is older than BUILD_HEARTBEAT_TIMEOUT lost its worker: mark it failed.

    Run by every build request and on a django-q schedule (collections_app.schedules). A build
    marked failed here that is in fact still running can never commit: `_commit` checks its
    lease inside the committing transaction."""
    from .webhooks import build_finished

    now = now or timezone.now()
    cutoff = now - timedelta(seconds=int(settings.BUILD_HEARTBEAT_TIMEOUT))
    stale = BuildRun.objects.filter(status__in=ACTIVE_STATES, heartbeat_at__lt=cutoff)
    failed = 0
    for pk in stale.values_list("pk", flat=True):
        # One at a time, so each build failed here (and only here) is told to the webhooks once.
        if stale.filter(pk=pk).update(
            status=BuildRun.FAILED, finished_at=now, error=STALE_MESSAGE, transient=True
        ):
            failed += 1
            build_finished(run=BuildRun.objects.select_related("collection__agent").get(pk=pk))
    return failed


class Heartbeat:
    """Beats for a running build from a thread of its own, so one long document (extraction, an
    embedding batch) never makes a live build look dead to the sweep.

    Beating stops with the worker process, which is what the sweep detects. Inside a caller's
    transaction (the tests' `db` fixture) no thread is started: another connection could not see
    the uncommitted build, and on SQLite it would wait for the caller's write lock.
    """

    def __init__(self, run: BuildRun):
        self.run = run
        self.interval = min(60.0, max(0.2, int(settings.BUILD_HEARTBEAT_TIMEOUT) / 4))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # The thread's own connection takes the scope of the task that started it.
        self._agent_id = current_task_agent()

    def __enter__(self):
        if not connection.in_atomic_block:
            self._thread = threading.Thread(
                target=self._beat, name=f"build-{self.run.pk}-heartbeat", daemon=True
            )
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _beat(self) -> None:
        from django.db import connections

        scope = task_scope(self._agent_id) if self._agent_id is not None else nullcontext()
        try:
            with scope:
                self._beat_until_stopped()
        finally:
            connections.close_all()

    def _beat_until_stopped(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                alive = BuildRun.objects.filter(pk=self.run.pk, status=BuildRun.RUNNING).update(
                    heartbeat_at=timezone.now()
                )
            except Exception:  # a busy database: the next beat tries again
                logger.warning("build %s: heartbeat not written", self.run.pk, exc_info=True)
                continue
            if not alive:
                return


def check_lease(collection: Collection, run: BuildRun) -> None:
    """Inside the committing transaction: this build must still be running and hold the latest generation.

    Both rows are locked (the collection's first, as request_build does), so neither the
    sweep nor a new request can change them between this check and the commit; a build
    that lost its lease raises, and the transaction rolls back having written nothing.

    Reads `collection.analyzer` afresh from the locked row as well: a build writes its index with the
    analyzer in force when it commits (services.analyzers), so a change made while it ran is not lost."""
    generation, collection.analyzer = (
        Collection.objects.select_for_update()
        .filter(pk=collection.pk)
        .values_list("build_generation", "analyzer")
        .first()
    ) or (None, collection.analyzer)
    status = BuildRun.objects.select_for_update().filter(pk=run.pk).values_list("status", flat=True).first()
    if status != BuildRun.RUNNING or generation != run.generation:
        why = "a newer build was requested" if generation != run.generation else f"it was marked {status}"
        raise LeaseLost(
            f'build {run.pk} no longer holds the lease of "{collection.name}" '
            f"({why}); "
            "it rolled back without writing"
        )
