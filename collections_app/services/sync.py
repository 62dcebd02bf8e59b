"""Collections that stay current by themselves: a cheap check of the folder, and a build only on a change.

A synced collection is checked every `every` minutes by one periodic sweep (`sweep_due`, a django-q2
schedule in collections_app.schedules) that queues a check task per collection that is due. A check
(`check_source`) lists the folder (names, sizes, mtimes and inodes, no reading), reads only the files
whose stat differs from the last check's snapshot to fingerprint them, and compares the result with
the documents the live build holds. New, changed or deleted files, documents uploaded or deleted in
the admin, or a collection never built, queue one build through `builds.request_build`, whose lease
keeps it to one build queued or running per collection: a check that finds a build active queues
nothing and looks again next time.

A folder state the last sync build was asked for is not built again: when that build was refused (the
known-answers gate, an empty build) or failed, the old build keeps answering and the collection waits
for the folder to change again (or for a person to rebuild), rather than failing every period.
"""

import hashlib
import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from ragsite.errors import RagsiteError

from ..models import BuildRun, Collection, CollectionBuilt, CollectionSync, Document
from ..models_sync import MAX_SYNC_MINUTES
from .knowledge import source_folder
from .leases import ACTIVE_STATES
from .sources import MAX_DOCUMENT_BYTES, folder_entries

logger = logging.getLogger("ragsite.sync")

MIN_EVERY, MAX_EVERY = 1, MAX_SYNC_MINUTES
SYNC_REQUESTER = "sync"
READ_BLOCK = 1024 * 1024


@dataclass
class Check:
    """What one check found. Names only, never a path."""

    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    uploads: bool = False  # documents uploaded or deleted in the admin since the last build
    never_built: bool = False
    fingerprinted: int = 0  # files read this check (their stat changed since the last one)
    build: BuildRun | None = None
    outcome: str = ""

    @property
    def changes(self) -> bool:
        return bool(self.new or self.changed or self.deleted or self.uploads or self.never_built)

    def summary(self) -> str:
        parts = [f"{len(names)} {what}" for names, what in
                 ((self.new, "new"), (self.changed, "changed"), (self.deleted, "deleted")) if names]
        if self.uploads:
            parts.append("uploads changed")
        if self.never_built:
            parts.append("never built")
        return ", ".join(parts) or "unchanged"


def set_sync(*, collection: Collection, every: int | None) -> CollectionSync | None:
    """Sync `collection` every `every` minutes, or stop (None). The first check is due at once."""
    current = CollectionSync.objects.filter(collection=collection).first()
    if every is None:
        if current is not None and current.enabled:
            current.enabled, current.next_check_at = False, None
            current.save(update_fields=["enabled", "next_check_at"])
        return current
    if isinstance(every, bool) or not isinstance(every, int) or not MIN_EVERY <= every <= MAX_EVERY:
        raise RagsiteError(f"sync_every is a whole number of minutes from {MIN_EVERY} to {MAX_EVERY}",
                           code="invalid_sync_every")
    if current is None:
        current = CollectionSync(collection=collection)
    due = timezone.now() if not current.enabled or current.next_check_at is None else current.next_check_at
    if current.pk and current.enabled and current.last_checked_at is not None:
        due = current.last_checked_at + timedelta(minutes=every)
    current.enabled, current.every, current.next_check_at = True, every, due
    current.save()
    return current


def describe(collection: Collection) -> dict | None:
    """The sync fields the API and the admin show; None when the collection does not sync."""
    sync = CollectionSync.objects.filter(collection=collection).first()
    if sync is None or not sync.enabled:
        return None
    return {"sync_every": sync.every, "last_checked_at": sync.last_checked_at,
            "last_changed_at": sync.last_changed_at, "next_check_at": sync.next_check_at,
            "outcome": sync.last_outcome, "build": sync.last_build_id}


def sweep_due(now=None) -> list[int]:
    """Claim every synced collection whose check is due, and queue a check of each; returns their ids.

    Claiming moves `next_check_at` on by the collection's period with a conditional update, so two
    clusters sweeping at once queue one check, and a slow check is not queued again meanwhile."""
    now = now or timezone.now()
    claimed = []
    due = CollectionSync.objects.filter(enabled=True, next_check_at__lte=now).order_by("next_check_at")
    for sync in due.values("pk", "collection_id", "next_check_at", "every"):
        won = CollectionSync.objects.filter(pk=sync["pk"], next_check_at=sync["next_check_at"]).update(
            next_check_at=now + timedelta(minutes=sync["every"]))
        if won:
            claimed.append(sync["collection_id"])
    for collection_id in claimed:
        transaction.on_commit(lambda pk=collection_id: _enqueue(pk))
    return claimed


def _enqueue(collection_id: int) -> None:
    from django_q.tasks import async_task

    async_task("collections_app.tasks.check_collection_sync", collection_id, task_name=f"sync-{collection_id}")


def check_source(*, collection: Collection, now=None) -> Check:
    """Check the collection's folder against its live build and queue a build if something changed."""
    from .builds import request_build

    now = now or timezone.now()
    sync = CollectionSync.objects.filter(collection=collection).first() or CollectionSync(collection=collection)
    check = Check()
    try:
        folder = source_folder(collection).path
    except RagsiteError as exc:
        check.outcome = f"the source cannot be read: {exc.message}"
        return _record(sync, check, now, snapshot=sync.snapshot)
    snapshot, current = _scan(folder, sync.snapshot, check) if folder is not None else ({}, {})
    stored = dict(collection.documents.filter(source=Document.FOLDER).values_list("name", "fingerprint"))
    check.new = sorted(set(current) - set(stored))
    check.deleted = sorted(set(stored) - set(current))
    check.changed = sorted(name for name in set(current) & set(stored) if current[name] != stored[name])
    check.uploads = bool(collection.rebuild_needed)
    check.never_built = not CollectionBuilt.objects.filter(collection=collection).exists()
    signature = _signature(current, check)
    if not check.changes:
        check.outcome = "unchanged"
        return _record(sync, check, now, snapshot=snapshot, attempted="")
    if signature == sync.attempted and sync.last_build_id is not None:
        last = BuildRun.objects.filter(pk=sync.last_build_id).values_list("status", flat=True).first()
        if last not in ACTIVE_STATES:
            check.outcome = f"{check.summary()}; not built again: build {sync.last_build_id} of this state {last}"
            return _record(sync, check, now, snapshot=snapshot)
    active = collection.runs.filter(status__in=ACTIVE_STATES).values_list("pk", flat=True).first()
    if active is not None:
        check.outcome = f"{check.summary()}; waiting for build {active} to finish"
        return _record(sync, check, now, snapshot=snapshot)
    try:
        check.build = request_build(collection=collection, requested_by=SYNC_REQUESTER)
    except RagsiteError as exc:  # a request that won the race, or a source that vanished meanwhile
        check.outcome = f"{check.summary()}; not queued: {exc.message}"
        return _record(sync, check, now, snapshot=snapshot)
    check.outcome = f"{check.summary()}: build {check.build.pk} queued"
    return _record(sync, check, now, snapshot=snapshot, attempted=signature, build=check.build)


def _scan(folder, previous: dict, check: Check) -> tuple[dict, dict[str, str]]:
    """(the new snapshot, {name: fingerprint}); a file is read only when its stat changed since `previous`."""
    snapshot, current = {}, {}
    for entry in folder_entries(folder):
        try:
            stat = entry.path.stat()
        except OSError:
            continue  # gone between the listing and now: the next check sees it gone
        key = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
        cached = previous.get(entry.name)
        if isinstance(cached, list) and len(cached) == 4 and cached[:3] == key:
            fingerprint = cached[3]
        else:
            fingerprint = _fingerprint(entry.path, stat.st_size)
            check.fingerprinted += 1
        snapshot[entry.name] = [*key, fingerprint]
        current[entry.name] = fingerprint
    return snapshot, current


def _fingerprint(path, size: int) -> str:
    """SHA-256 of the file, as a build fingerprints it; a file the build would refuse unread is not read."""
    if size > MAX_DOCUMENT_BYTES:
        return f"too-large:{size}"
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while block := handle.read(READ_BLOCK):
                digest.update(block)
    except OSError:
        return "unreadable"
    return digest.hexdigest()


def _signature(current: dict[str, str], check: Check) -> str:
    digest = hashlib.sha256()
    for name in sorted(current):
        digest.update(f"{name}\x00{current[name]}\x00".encode("utf-8", "surrogateescape"))
    digest.update(b"uploads" if check.uploads else b"")
    return digest.hexdigest()


def _record(sync: CollectionSync, check: Check, now, *, snapshot: dict, attempted: str | None = None,
            build: BuildRun | None = None) -> Check:
    """Write what the check saw; `attempted` None keeps the state the last sync build was asked for."""
    if check.changes and _folder_state(snapshot) != _folder_state(sync.snapshot):
        sync.last_changed_at = now  # a change this check is the first to see
    sync.last_checked_at, sync.snapshot, sync.last_outcome = now, snapshot, check.outcome[:300]
    if sync.enabled and (sync.next_check_at is None or sync.next_check_at <= now):
        sync.next_check_at = now + timedelta(minutes=sync.every)
    if attempted is not None:
        sync.attempted = attempted
    if build is not None:
        sync.last_build = build
    if sync.pk:
        sync.save()
    collection = sync.collection
    logger.info("sync check of %s/%s: %s (%s files read)", collection.agent.agent_id, collection.name,
                check.summary() if check.build is None else f"{check.summary()}, build {check.build.pk}",
                check.fingerprinted)
    return check


def _folder_state(snapshot: dict) -> dict:
    return {name: value[3] for name, value in snapshot.items() if isinstance(value, list) and len(value) == 4}
