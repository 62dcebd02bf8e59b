"""What became of a build: one answer for the API, MCP, the admin and the command.

A build is queued by the web process and carried out by a task worker (`manage.py
qcluster`). When nobody is there to carry it out, a queued build would wait forever
in silence; `worker_missing` says so once the build has waited BUILD_STALE_SECONDS
and no cluster has reported a heartbeat.
"""

import time
from datetime import datetime, timedelta

from django.db.models import OuterRef, Subquery
from django.utils import timezone

from ragsite.errors import NotFound, RagsiteError

from ...conf import settings
from ...models import Agent, BuildRun, Collection
from .. import known_answers

MAX_LISTED = 50
MAX_WAIT_SECONDS = 60
POLL_SECONDS = 0.5
ACTIVE = (BuildRun.QUEUED, BuildRun.RUNNING)
START_WORKER = "start one with `manage.py qcluster` (make run starts one)"


def worker_running() -> bool:
    """Whether any django-q2 cluster reported a heartbeat in the last few seconds.

    A cluster saves its status every half second with a 3-second expiry, to Redis
    with the Redis broker and to the `task_cluster` cache otherwise; an expired one
    is no longer listed.
    """
    from django_q.brokers import Broker, get_broker
    from django_q.conf import Conf

    try:
        broker = get_broker()
        if type(broker).get_stats is not Broker.get_stats:  # Redis: live keys by pattern
            return any(broker.get_stats(f"{Conf.Q_STAT}:*") or [])
        # The cache-backed listing removes expired keys from the list it is iterating, which
        # skips the key after each one (a live cluster listed after a dead one goes unseen).
        cache = broker.cache
        return cache is not None and any(cache.get(key) for key in list(cache.get(Conf.Q_STAT) or []))
    except Exception:  # an unreachable broker is not a reason to fail a status read
        return False


def worker_missing(run: BuildRun, *, now: datetime | None = None, running: bool | None = None) -> bool:
    """A queued build that has waited longer than BUILD_STALE_SECONDS while no worker is alive."""
    if run.status != BuildRun.QUEUED:
        return False
    now = now or timezone.now()
    if now - run.created_at < timedelta(seconds=int(settings.BUILD_STALE_SECONDS)):
        return False
    return not (worker_running() if running is None else running)


def build_phase(run: BuildRun) -> str:
    """What a build is doing, for the admin bar and build_status: derived from the counts the build saves
    as it goes (the last document is counted with the paragraphs to embed, so "reading" ends there)."""
    if run.status == BuildRun.QUEUED:
        return "queued"
    if run.status != BuildRun.RUNNING:
        return "finished"
    if not run.documents_total or run.documents_done < run.documents_total:
        return "reading documents"
    if run.paragraphs_done < run.paragraphs_total:
        return "embedding paragraphs"
    return "saving"


def waiting_notice(run: BuildRun, **kwargs) -> str | None:
    """The sentence shown beside a build nobody is carrying out, or None."""
    if not worker_missing(run, **kwargs):
        return None
    return (
        f"no task worker is running: build {run.pk} has been queued since "
        f"{run.created_at:%H:%M:%S} UTC; {START_WORKER}"
    )


def build_status(*, run: BuildRun, running: bool | None = None) -> dict:
    """Everything a caller may know about one build. Names of refused documents, never paths."""
    seconds = None
    if run.started_at is not None:
        seconds = round(((run.finished_at or timezone.now()) - run.started_at).total_seconds(), 3)
    return {
        "build": run.pk,
        "collection": run.collection.name,
        "status": run.status,
        "percent": run.percent,
        "progress": {
            "phase": build_phase(run),
            "documents_done": run.documents_done,
            "documents_total": run.documents_total,
            "paragraphs_done": run.paragraphs_done,
            "paragraphs_total": run.paragraphs_total,
        },
        "passages": run.passages,
        "documents_read": run.documents_read,
        "documents_reused": run.documents_reused,
        "documents_refused": run.documents_refused,
        "documents_relabelled": run.documents_relabelled,
        "documents_in_review": run.documents_in_review,
        "paragraphs_embedded": run.paragraphs_embedded,
        # null: not recorded (the build has not finished); []: nothing refused; names otherwise.
        "refused": run.refused,
        "warnings": list(run.warnings or []),
        "problems": list(run.problems or []),
        "model": run.model or None,
        "previous_model": run.previous_model or None,
        "error": run.error or None,
        "waiting": waiting_notice(run, running=running),
        "requested_by": run.requested_by,
        "known_answers": _known_answers(run),
        # ISO 8601 strings, the same over the API and MCP.
        "created_at": _iso(run.created_at),
        "started_at": _iso(run.started_at),
        "finished_at": _iso(run.finished_at),
        "seconds": seconds,
    }


def _known_answers(run: BuildRun) -> dict | None:
    report = known_answers.for_build(run)
    if report is not None:
        report["measured_at"] = _iso(report["measured_at"])
    return report


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def wait_for_build(*, run: BuildRun, seconds: float) -> BuildRun:
    """The build after it finished, or after `seconds` (at most MAX_WAIT_SECONDS) if it is still going."""
    if not 0 <= seconds <= MAX_WAIT_SECONDS:
        raise RagsiteError(f"wait_seconds must be between 0 and {MAX_WAIT_SECONDS}", code="invalid_wait")
    deadline = time.monotonic() + seconds
    run.refresh_from_db()
    while run.status in ACTIVE and time.monotonic() < deadline:
        time.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        run.refresh_from_db()
    return run


def collection_summaries(*, agent: Agent) -> list[dict]:
    """The agent's collections, each with its last build's outcome (null: never built)."""
    newest = (
        BuildRun.objects.filter(collection=OuterRef("pk")).order_by("-created_at", "-id").values("pk")[:1]
    )
    collections = list(agent.collections.annotate(last_run=Subquery(newest)).order_by("name"))
    runs = BuildRun.objects.select_related("collection").in_bulk(
        [c.last_run for c in collections if c.last_run]
    )
    latest = {run.collection_id: run for run in runs.values()}
    running = None
    answer = []
    for collection in collections:
        run = latest.get(collection.pk)
        if run is not None and run.status == BuildRun.QUEUED and running is None:
            running = worker_running()
        answer.append(
            {
                "name": collection.name,
                "built_from": collection.built_from,
                "folder": collection.folder,
                "method": collection.method,
                "analyzer": collection.analyzer,
                "per_reader": collection.per_reader,
                "last_build": None if run is None else build_status(run=run, running=running),
            }
        )
    return answer


def get_build(*, collection: Collection, build_id: int) -> BuildRun:
    """One build of the collection; a build of any other collection answers as a missing one."""
    run = BuildRun.objects.select_related("collection").filter(collection=collection, pk=build_id).first()
    if run is None:
        raise NotFound(f'collection "{collection.name}" has no build {build_id}', code="unknown_build")
    return run


def recent_builds(*, collection: Collection, limit: int = 10) -> list[BuildRun]:
    """The collection's latest builds, newest first."""
    if not 1 <= limit <= MAX_LISTED:
        raise RagsiteError(f"limit must be between 1 and {MAX_LISTED}", code="invalid_limit")
    return list(BuildRun.objects.select_related("collection").filter(collection=collection)[:limit])


def latest_build(collection: Collection) -> BuildRun | None:
    return BuildRun.objects.select_related("collection").filter(collection=collection).first()
