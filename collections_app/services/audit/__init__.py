"""The read audit's store side: write an entry, purge the expired ones, export a selection.

`write_read` is the writer `ragsite.audit` calls (installed at start by the AppConfig). It is one
INSERT in the request, before the answer leaves: an answer that reached its caller has a committed
entry, and a read whose entry could not be written fails. On SQLite, while another process holds the
write lock, the entry is fsynced to a local spool instead (services.audit.spool) and moved in later.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Iterator
from datetime import timedelta

from django.db import OperationalError, connection, transaction
from django.utils import timezone

from ragsite.audit import Read, question_fields
from ragsite.errors import store_busy

from ...conf import settings
from ...models import ReadAudit
from ..search.rows import AUDIT_WRITES
from . import spool

# The columns an export carries, in order (the same for JSON Lines and CSV).
EXPORT_FIELDS = (
    "at",
    "channel",
    "kind",
    "agent_id",
    "key_id",
    "staff_user",
    "on_behalf_of",
    "reader",
    "target",
    "question",
    "question_sha256",
    "ids",
    "size",
    "status",
)
EXPORT_FORMATS = ("jsonl", "csv")
# A CSV cell a spreadsheet would run as a formula (the question is the caller's text) is quoted.
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def write_read(read: Read) -> None:
    question, digest = question_fields(read.question, settings.AUDIT_QUESTIONS)
    fields = entry_fields(read, question, digest)
    if connection.vendor == "sqlite":
        _insert_without_waiting(fields)
    elif connection.vendor != "postgresql":
        ReadAudit.objects.create(**fields)
    elif connection.in_atomic_block:  # the request's own transaction (row-level security's scope)
        _commit_without_waiting_for_disk()
        ReadAudit.objects.create(**fields)
    else:
        with transaction.atomic():
            _commit_without_waiting_for_disk()
            ReadAudit.objects.create(**fields)


def _insert_without_waiting(fields: dict) -> None:
    """SQLite: the entry goes in now if the write lock is free, else to this process's spool (a search
    never waits on another process's write); spooled entries follow the next entry that goes in."""
    # On the driver's connection itself: Django's cursor wrapper would double these statements' cost.
    connection.ensure_connection()
    raw = connection.connection
    waited = int(float(connection.settings_dict["OPTIONS"].get("timeout", 5)) * 1000)
    raw.execute("PRAGMA busy_timeout = 0")
    try:
        try:
            ReadAudit.objects.create(**fields)
        except OperationalError as exc:
            if store_busy(exc) is None:
                raise
            spool.append(fields)
            return
        _counted(1)
        if spool.due():
            try:
                _counted(spool.drain())
            except OperationalError as exc:  # taken again meanwhile: the entries wait for the next one
                if store_busy(exc) is None:
                    raise
    finally:
        raw.execute(f"PRAGMA busy_timeout = {waited}")


def _counted(rows: int) -> None:
    """Tell the search's change marks (services.search.rows) that these rows on this connection were the
    audit's own, so the next search does not read its state again because of them."""
    raw = connection.connection
    seen_on, seen = getattr(connection, AUDIT_WRITES, (None, 0))
    setattr(connection, AUDIT_WRITES, (raw, (seen if seen_on is raw else 0) + rows))


def _commit_without_waiting_for_disk() -> None:
    """The transaction commits before the answer leaves but does not wait for the WAL's flush (3-4 ms
    on a busy disk, measured): the durability SQLite's WAL with synchronous=NORMAL gives. The entry
    outlives any crash of ragsite's processes; only the database server's or the machine's own crash
    within PostgreSQL's WAL-writer delay could lose it (docs/operations.md)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT set_config('synchronous_commit', 'off', true)")


def entry_fields(read: Read, question: str, digest: str) -> dict:
    return {
        "at": timezone.now(),
        "channel": read.channel,
        "kind": read.kind,
        "agent_id": read.agent_id,
        "key_id": read.key_id,
        "staff_user": read.staff[:150],
        "on_behalf_of": (read.on_behalf_of or "")[:200],
        "reader": (read.reader or "")[:200],
        "target": read.target[:200],
        "question": question,
        "question_sha256": digest,
        "ids": read.ids,
        "size": read.size,
        "status": read.status,
    }


def retention_days() -> int:
    days = int(settings.AUDIT_RETENTION_DAYS)
    if days < 0:
        from django.core.exceptions import ImproperlyConfigured

        raise ImproperlyConfigured(f"AUDIT_RETENTION_DAYS must be 0 (keep forever) or more, not {days}")
    return days


def purge_reads(*, now=None) -> int:
    """Move spooled entries in, then delete the entries older than AUDIT_RETENTION_DAYS (none when it
    is 0); returns how many were deleted."""
    spool.drain()
    days = retention_days()
    if days == 0:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    deleted, _ = ReadAudit.objects.filter(at__lt=cutoff).delete()
    return deleted


def entry_row(entry: ReadAudit) -> dict:
    row = {name: getattr(entry, name) for name in EXPORT_FIELDS}
    row["at"] = entry.at.isoformat()
    return row


def export_lines(entries: Iterable[ReadAudit], fmt: str) -> Iterator[str]:
    """The entries as JSON Lines or CSV (a header first), one string per line, oldest first as given."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"an export is {' or '.join(EXPORT_FORMATS)}, not {fmt!r}")
    if fmt == "jsonl":
        for entry in entries:
            yield json.dumps(entry_row(entry), ensure_ascii=False) + "\n"
        return
    buffer = io.StringIO()
    out = csv.DictWriter(buffer, fieldnames=EXPORT_FIELDS, lineterminator="\n")

    def flushed() -> str:
        text = buffer.getvalue()
        buffer.seek(0)
        buffer.truncate()
        return text

    out.writeheader()
    yield flushed()
    for entry in entries:
        row = entry_row(entry)
        row["ids"] = " ".join(row["ids"])
        row = {name: _inert(value) for name, value in row.items()}
        out.writerow(row)
        yield flushed()


def _inert(value):
    if isinstance(value, str) and value.startswith(FORMULA_STARTS):
        return "'" + value
    return value


def select_reads(*, agent_id=None, reader=None, target=None, since=None, until=None):
    """The entries matching the filters, oldest first (the order an export reads best in)."""
    entries = ReadAudit.objects.all()
    if agent_id:
        entries = entries.filter(agent_id=agent_id)
    if reader:
        entries = entries.filter(reader=reader)
    if target:
        entries = entries.filter(target=target)
    if since is not None:
        entries = entries.filter(at__gte=since)
    if until is not None:
        entries = entries.filter(at__lt=until)
    return entries.order_by("at", "id")
