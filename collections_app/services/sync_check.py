"""One check of a synced collection's folder (services.sync has the overview): stat, fingerprint what changed,
compare with the live build, and queue a build only when something changed."""

import hashlib
import json
import logging
from dataclasses import dataclass, field
from datetime import timedelta

from django.utils import timezone

from ragsite.errors import RagsiteError
from ragsite.instruments import SYNC_CHECKS

from ..conf import settings
from ..models import BuildRun, Collection, CollectionBuilt, CollectionSync, Document
from .builds import request_build
from .knowledge import source_folder
from .leases import ACTIVE_STATES
from .origins import origin_of, readers_from_group
from .origins.readers import group_labels, labels_for
from .origins.readers import signature as labels_signature
from .sources import (
    MAX_DOCUMENT_BYTES,
    SIDECAR_SUFFIX,
    UNREADABLE_MARK,
    file_readers,
    folder_entries,
    read_sidecar,
    remote_entries,
    settle_seconds,
    settled,
    too_large_mark,
)
from .webhooks import sync_failed

logger = logging.getLogger("ragsite.sync")

SYNC_REQUESTER = "sync"
# Outcomes that mean the check itself failed: shown like any outcome, and told once as `sync.failed`.
UNREADABLE, CHECK_FAILED = "the source cannot be read", "the check failed"
READ_BLOCK = 1024 * 1024


@dataclass
class Check:
    """What one check found. Names only, never a path."""

    new: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    relabelled: list[str] = field(default_factory=list)  # the same bytes, other readers from the source
    uploads: bool = False  # documents uploaded or deleted in the admin since the last build
    never_built: bool = False
    fingerprinted: int = 0  # files read this check (their stat changed since the last one)
    build: BuildRun | None = None
    outcome: str = ""
    unsettled: list[str] = field(default_factory=list)  # written to within the settle window: not read yet
    retry_pending: bool = False  # the last sync build failed transiently; a later check builds again

    @property
    def changes(self) -> bool:
        return bool(
            self.new or self.changed or self.deleted or self.relabelled or self.uploads or self.never_built
        )

    def summary(self) -> str:
        parts = [
            f"{len(names)} {what}"
            for names, what in (
                (self.new, "new"),
                (self.changed, "changed"),
                (self.deleted, "deleted"),
                (self.relabelled, "re-labelled"),
            )
            if names
        ]
        if self.unsettled:
            parts.append(f"{len(self.unsettled)} still being written (read once unchanged)")
        if self.uploads:
            parts.append("uploads changed")
        if self.never_built:
            parts.append("never built")
        return ", ".join(parts) or "unchanged"


def check_source(*, collection: Collection, now=None) -> Check:
    """Check the collection's folder against its live build and queue a build if something changed."""
    now = now or timezone.now()
    sync = CollectionSync.objects.filter(collection=collection).first() or CollectionSync(
        collection=collection
    )
    check = Check()
    try:
        return _check(collection, sync, check, now)
    except Exception as exc:  # a check that fails is shown and told, never silent; the next one tries again
        logger.error(
            "sync check of %s/%s failed: %s",
            collection.agent.agent_id,
            collection.name,
            type(exc).__name__,
            exc_info=True,
        )
        check = Check(outcome=f"{CHECK_FAILED} ({type(exc).__name__}); the next check tries again")
        return _failed(sync, check, now, reason=type(exc).__name__)


def _check(collection: Collection, sync: CollectionSync, check: Check, now) -> Check:
    try:
        origin = origin_of(collection)
        folder = source_folder(collection).path if origin is None else None
        # A remote source is listed, never downloaded: its tokens (ETag, blob id) say what changed.
        listed = remote_entries(origin) if origin is not None else None
    except RagsiteError as exc:
        check.outcome = f"{UNREADABLE}: {exc.message}"
        return _failed(sync, check, now, reason=exc.code)
    documents = collection.documents.filter(source=Document.FOLDER)
    # Beside its bytes, a document is the labels its source's readers map to (origins.readers): "|" and
    # their signature end each state, so a change of them alone is told apart (`relabelled`).
    mapping = group_labels()
    if listed is not None:
        stored = {
            name: f"{token}|{labels_signature(labels)}"
            for name, token, labels in documents.values_list("name", "source_token", "source_labels")
        }
        current = {e.name: f"{e.token}|{labels_signature(labels_for(e.readers, mapping))}" for e in listed}
        snapshot = {e.name: [e.size, 0, 0, current[e.name]] for e in listed}
    else:
        # A document is its bytes and the attributes its sidecar gives it (sources.read_sidecar).
        stored = {
            name: f"{fingerprint}+{attributes_signature(attributes)}|{labels_signature(labels)}"
            for name, fingerprint, attributes, labels in documents.values_list(
                "name", "fingerprint", "attributes", "source_labels"
            )
        }
        by_group = folder is not None and readers_from_group(collection)

        def labelled(path, stat) -> str:
            return labels_signature(labels_for(file_readers(path, stat), mapping)) if by_group else ""

        snapshot, current = (
            _scan(folder, sync.snapshot, check, stored, labelled) if folder is not None else ({}, {})
        )
    check.new = sorted(set(current) - set(stored))
    check.deleted = sorted(set(stored) - set(current))
    differ = sorted(name for name in set(current) & set(stored) if current[name] != stored[name])
    check.relabelled = [n for n in differ if current[n].rsplit("|", 1)[0] == stored[n].rsplit("|", 1)[0]]
    check.changed = [n for n in differ if n not in check.relabelled]
    check.uploads = bool(collection.rebuild_needed)
    check.never_built = not CollectionBuilt.objects.filter(collection=collection).exists()
    signature = _signature(current, check)
    if not check.changes:
        check.outcome = check.summary()
        sync.retries = 0
        return _record(sync, check, now, snapshot=snapshot, attempted="", retry_at=None)
    retry = ""
    if signature == sync.attempted and sync.last_build_id is not None:
        last = BuildRun.objects.filter(pk=sync.last_build_id).values_list("status", "transient").first()
        status, transient = last if last is not None else (None, False)
        if status not in ACTIVE_STATES:
            said = f"{check.summary()}; build {sync.last_build_id} of this state {status}"
            if not (transient and sync.retries < retry_limit()):
                check.outcome = (
                    f"{check.summary()}; not built again: build {sync.last_build_id} of this state {status}"
                )
                if transient:
                    check.outcome += f" after {sync.retries} retries"
                return _record(sync, check, now, snapshot=snapshot, retry_at=None)
            if sync.retry_at is None:
                # First seen failed: the first retry waits SYNC_RETRY_SECONDS, each later one twice as long.
                sync.retry_at = now + retry_wait(sync.retries)
            if now < sync.retry_at:
                check.outcome = (
                    f"{said} (it may pass); retry {sync.retries + 1} of {retry_limit()} pending, "
                    f"at {timezone.localtime(sync.retry_at):%H:%M:%S}"
                )
                check.retry_pending = True
                return _record(sync, check, now, snapshot=snapshot)
            retry = (
                f" (retry {sync.retries + 1} of {retry_limit()}, after build {sync.last_build_id} {status})"
            )
    active = collection.runs.filter(status__in=ACTIVE_STATES).values_list("pk", flat=True).first()
    if active is not None:
        check.outcome = f"{check.summary()}; waiting for build {active} to finish"
        return _record(sync, check, now, snapshot=snapshot)
    try:
        check.build = request_build(collection=collection, requested_by=SYNC_REQUESTER)
    except RagsiteError as exc:  # a request that won the race, or a source that vanished meanwhile
        check.outcome = f"{check.summary()}; not queued: {exc.message}"
        return _record(sync, check, now, snapshot=snapshot)
    check.outcome = f"{check.summary()}: build {check.build.pk} queued{retry}"
    sync.retries = sync.retries + 1 if retry else 0
    return _record(sync, check, now, snapshot=snapshot, attempted=signature, build=check.build, retry_at=None)


def retry_limit() -> int:
    """SYNC_RETRY_LIMIT: how many times a folder state whose sync build failed transiently is built again."""
    return max(0, int(settings.SYNC_RETRY_LIMIT))


def retry_wait(retries: int) -> timedelta:
    """The wait before retry ``retries + 1``: SYNC_RETRY_SECONDS, doubled for each retry before it (a day
    at most)."""
    return timedelta(seconds=min(max(1, int(settings.SYNC_RETRY_SECONDS)) * 2**retries, 86400))


def _failed(sync: CollectionSync, check: Check, now, *, reason: str) -> Check:
    """Record a failed check; the agent's hooks hear of it when the previous check had not failed."""
    already = sync.last_outcome.startswith((UNREADABLE, CHECK_FAILED))
    check = _record(sync, check, now, snapshot=sync.snapshot)
    if not already:
        sync_failed(collection=sync.collection, reason=reason, checked_at=now)
    return check


def check_outcome(check: Check) -> str:
    """The check's outcome in the metrics' bounded words (its sentence names documents)."""
    if check.build is not None:
        return "queued"
    if check.outcome == "unchanged":
        return "unchanged"
    if check.outcome.startswith(UNREADABLE):
        return "unreadable"
    if check.outcome.startswith(CHECK_FAILED):
        return "failed"
    return "waiting" if "waiting for build" in check.outcome else "not_queued"


def attributes_signature(attributes: dict | None) -> str:
    """A short, order-free digest of a document's attributes, as stored or as its sidecar gives them."""
    return hashlib.sha256(json.dumps(attributes or {}, sort_keys=True).encode()).hexdigest()[:16]


def _scan(
    folder, previous: dict, check: Check, stored: dict[str, str], labelled
) -> tuple[dict, dict[str, str]]:
    """(the new snapshot, {name: "<fingerprint>+<attributes' signature>|<labels' signature>"}, the labels
    those `labelled(path, stat)` gives its group); a file or a sidecar is read only
    when its stat changed since `previous`, and only once it has stood still for the settle window
    (`sources.settled`): until then a file is as the live build has it (a new one is not seen yet), so
    nothing half-written is built, and nothing is lost."""
    snapshot, current = {}, {}
    for entry in folder_entries(folder):
        try:
            stat = entry.path.stat()
        except OSError:
            continue  # gone between the listing and now: the next check sees it gone
        if not settled(stat):
            check.unsettled.append(entry.name)
            if entry.name in stored:
                current[entry.name] = stored[entry.name]
            for name in (entry.name, entry.name + SIDECAR_SUFFIX):
                if name in previous:
                    snapshot[name] = previous[name]
            continue
        sidecar = _sidecar_state(entry, previous, check)
        if sidecar is not None:
            snapshot[entry.name + SIDECAR_SUFFIX] = sidecar
        key = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
        cached = previous.get(entry.name)
        if isinstance(cached, list) and len(cached) == 4 and cached[:3] == key:
            fingerprint = cached[3]
        else:
            fingerprint = _fingerprint(entry.path, stat.st_size)
            check.fingerprinted += 1
        snapshot[entry.name] = [*key, fingerprint]
        attributes = sidecar[3] if sidecar else attributes_signature({})
        current[entry.name] = f"{fingerprint}+{attributes}|{labelled(entry.path, stat)}"
    return snapshot, current


def _sidecar_state(entry, previous: dict, check: Check) -> list | None:
    """[size, mtime, inode, attributes' signature] of the entry's sidecar, or None when it has none."""
    path = entry.path.with_name(entry.path.name + SIDECAR_SUFFIX)
    try:
        if not path.is_file() or path.is_symlink():
            return None
        stat = path.stat()
    except OSError:
        return None
    key = [stat.st_size, stat.st_mtime_ns, stat.st_ino]
    cached = previous.get(entry.name + SIDECAR_SUFFIX)
    if isinstance(cached, list) and len(cached) == 4 and cached[:3] == key:
        return cached
    check.fingerprinted += 1
    return [*key, attributes_signature(read_sidecar(entry.path, entry.name)[0])]


def _fingerprint(path, size: int) -> str:
    """SHA-256 of the file, as a build fingerprints it; a file the build would refuse unread is not read."""
    if size > MAX_DOCUMENT_BYTES:
        return too_large_mark(size)
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            while block := handle.read(READ_BLOCK):
                digest.update(block)
    except OSError:
        return UNREADABLE_MARK
    return digest.hexdigest()


def _signature(current: dict[str, str], check: Check) -> str:
    digest = hashlib.sha256()
    for name in sorted(current):
        digest.update(f"{name}\x00{current[name]}\x00".encode("utf-8", "surrogateescape"))
    digest.update(b"uploads" if check.uploads else b"")
    return digest.hexdigest()


def _record(
    sync: CollectionSync,
    check: Check,
    now,
    *,
    snapshot: dict,
    attempted: str | None = None,
    build: BuildRun | None = None,
    retry_at="keep",
) -> Check:
    """Write what the check saw; `attempted` None keeps the state the last sync build was asked for;
    `retry_at` "keep" keeps the pending retry's time (None: no retry pending)."""
    SYNC_CHECKS.labels(outcome=check_outcome(check)).inc()
    if check.changes and _folder_state(snapshot) != _folder_state(sync.snapshot):
        sync.last_changed_at = now  # a change this check is the first to see
    sync.last_checked_at, sync.snapshot, sync.last_outcome = now, snapshot, check.outcome[:300]
    if sync.enabled and (sync.next_check_at is None or sync.next_check_at <= now):
        sync.next_check_at = now + timedelta(minutes=sync.every)
    if retry_at != "keep":
        sync.retry_at = retry_at
    if sync.enabled and check.unsettled:
        # A file still being written is looked at again once it may have settled, not a period later.
        soon = now + timedelta(seconds=max(settle_seconds(), 1))
        if sync.next_check_at is None or sync.next_check_at > soon:
            sync.next_check_at = soon
    if sync.enabled and sync.retry_at is not None and sync.next_check_at > sync.retry_at:
        sync.next_check_at = sync.retry_at  # a retry due before the next period is checked for then
    if attempted is not None:
        sync.attempted = attempted
    if build is not None:
        sync.last_build = build
    if sync.pk:
        sync.save()
    collection = sync.collection
    # An unchanged folder every few minutes is routine: DEBUG, so the console shows what changed.
    logger.log(
        logging.INFO if check.changes else logging.DEBUG,
        "sync check of %s/%s: %s (%s files read)",
        collection.agent.agent_id,
        collection.name,
        check.summary() if check.build is None else f"{check.summary()}, build {check.build.pk}",
        check.fingerprinted,
    )
    return check


def _folder_state(snapshot: dict) -> dict:
    return {name: value[3] for name, value in snapshot.items() if isinstance(value, list) and len(value) == 4}
