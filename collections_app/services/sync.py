"""Collections that stay current by themselves: a cheap check of the folder, and a build only on a change.

A synced collection is checked every `every` minutes by one periodic sweep (`sweep_due`, a django-q2
schedule in collections_app.schedules) that queues a check task per collection that is due. A check
(`sync_check.check_source`) lists the folder (names, sizes, mtimes and inodes, no reading), reads
only the files whose stat differs from the last check's snapshot to fingerprint them, and compares
the result with the documents the live build holds. New, changed or deleted files, documents uploaded or
deleted in the admin, or a collection never built, queue one build through `builds.request_build`, whose lease
keeps it to one build queued or running per collection: a check that finds a build active queues
nothing and looks again next time.

A folder state the last sync build was asked for is not built again: when that build was refused (the
known-answers gate, an empty build) or failed, the old build keeps answering and the collection waits
for the folder to change again (or for a person to rebuild), rather than failing every period. A build
that failed for a reason that may pass (its worker died, the store was locked, the embedder did not
answer: `BuildRun.transient`) is the exception: the same state is built again, at most
SYNC_RETRY_LIMIT times, the first after SYNC_RETRY_SECONDS and each later one after twice the wait.
"""

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from ragsite import queue, tracing
from ragsite.errors import RagsiteError
from ragsite.locks import short_lock_waits

from ..models import Collection, CollectionSync
from ..models.sync import MAX_SYNC_MINUTES

MIN_EVERY, MAX_EVERY = 1, MAX_SYNC_MINUTES


def set_sync(*, collection: Collection, every: int | None) -> CollectionSync | None:
    """Sync `collection` every `every` minutes, or stop (None). The first check is due at once."""
    current = CollectionSync.objects.filter(collection=collection).first()
    if every is None:
        if current is not None and current.enabled:
            current.enabled, current.next_check_at = False, None
            with short_lock_waits(check_keys=True):
                current.save(update_fields=["enabled", "next_check_at"])
        return current
    if isinstance(every, bool) or not isinstance(every, int) or not MIN_EVERY <= every <= MAX_EVERY:
        raise RagsiteError(
            f"sync_every is a whole number of minutes from {MIN_EVERY} to {MAX_EVERY}",
            code="invalid_sync_every",
        )
    if current is None:
        current = CollectionSync(collection=collection)
    due = timezone.now() if not current.enabled or current.next_check_at is None else current.next_check_at
    if current.pk and current.enabled and current.last_checked_at is not None:
        due = current.last_checked_at + timedelta(minutes=every)
    current.enabled, current.every, current.next_check_at = True, every, due
    with short_lock_waits(check_keys=True):  # its key check waits on a held collection row: briefly
        current.save()
    return current


def describe(collection: Collection) -> dict | None:
    """The sync fields the API and the admin show; None when the collection does not sync."""
    sync = CollectionSync.objects.filter(collection=collection).first()
    if sync is None or not sync.enabled:
        return None
    return {
        "sync_every": sync.every,
        "last_checked_at": sync.last_checked_at,
        "last_changed_at": sync.last_changed_at,
        "next_check_at": sync.next_check_at,
        "outcome": sync.last_outcome,
        "build": sync.last_build_id,
        "retry_at": sync.retry_at,
        "changed_since_build": changed_since_build(collection, sync),
    }


def changed_since_build(collection: Collection, sync: CollectionSync | None = None) -> bool:
    """Whether a check has seen the folder change after the live build was made (or it was never built):
    what agents get is older than the folder until the build that follows lands."""
    from ..models import CollectionBuilt

    sync = sync or CollectionSync.objects.filter(collection=collection).first()
    if sync is None or sync.last_changed_at is None:
        return False
    built = CollectionBuilt.objects.filter(collection=collection)
    built_at = built.values_list("built_at", flat=True).first()
    return built_at is None or sync.last_changed_at > built_at


def sweep_due(now=None) -> list[int]:
    """Claim every synced collection whose check is due, and queue a check of each; returns their ids.

    Claiming moves `next_check_at` on by the collection's period with a conditional update, so two
    clusters sweeping at once queue one check, and a slow check is not queued again meanwhile."""
    now = now or timezone.now()
    claimed = []
    due = CollectionSync.objects.filter(enabled=True, next_check_at__lte=now).order_by("next_check_at")
    for sync in due.values("pk", "collection_id", "next_check_at", "every"):
        won = CollectionSync.objects.filter(pk=sync["pk"], next_check_at=sync["next_check_at"]).update(
            next_check_at=now + timedelta(minutes=sync["every"])
        )
        if won:
            claimed.append(sync["collection_id"])
    for collection_id in claimed:
        transaction.on_commit(tracing.keeping_context(lambda pk=collection_id: _enqueue(pk)))
    return claimed


def _enqueue(collection_id: int) -> None:
    queue.enqueue("collections_app.tasks.check_collection_sync", collection_id, name=f"sync-{collection_id}")
