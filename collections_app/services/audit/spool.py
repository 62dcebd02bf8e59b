"""Where a read-audit entry waits when SQLite's write lock is held by another process.

A search never waits on the store's write lock (a build's commit, a long import): its entry is
appended to a spool file of this process instead, flushed and fsynced before the answer leaves, and
moved into the table by the next entry this process writes or by the hourly purge. One file per
process, locked while written and while drained; a drained file is emptied, not removed, so an
append that opened it meanwhile is never written into a deleted file.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
from datetime import datetime
from pathlib import Path

from django.db import transaction

from ...conf import settings
from ...models import ReadAudit

logger = logging.getLogger("ragsite.audit")

# How often a process looks for other processes' spooled entries (its own it moves at once).
CHECK_SECONDS = 10.0
_state = {"pending": False, "next_check": 0.0}


def folder() -> Path:
    return Path(settings.AUDIT_SPOOL_DIR)


def append(fields: dict) -> None:
    """Keep one entry's fields on disk (fsynced) for `drain` to move into the table."""
    spool = folder()
    spool.mkdir(parents=True, exist_ok=True)
    line = json.dumps({**fields, "at": fields["at"].isoformat()}, ensure_ascii=False) + "\n"
    with open(spool / f"{os.getpid()}.jsonl", "a", encoding="utf-8") as out:
        fcntl.flock(out, fcntl.LOCK_EX)
        out.write(line)
        out.flush()
        os.fsync(out.fileno())
    _state["pending"] = True


def due() -> bool:
    """Whether this process should look at the spool now: it spooled something, or it is time."""
    now = time.monotonic()
    if _state["pending"] or now >= _state["next_check"]:
        _state["next_check"] = now + CHECK_SECONDS
        return True
    return False


def drain() -> int:
    """Move every spooled entry (of any process on this machine) into the table; returns how many."""
    spool = folder()
    if not spool.is_dir():
        _state["pending"] = False
        return 0
    moved = 0
    for path in sorted(spool.glob("*.jsonl")):
        if path.stat().st_size == 0:
            _forget_if_dead(path)
            continue
        with open(path, "r+", encoding="utf-8") as spooled:
            fcntl.flock(spooled, fcntl.LOCK_EX)
            entries = [_entry(line) for line in spooled.read().splitlines() if line.strip()]
            entries = [entry for entry in entries if entry is not None]
            with transaction.atomic():
                ReadAudit.objects.bulk_create(entries)
            spooled.seek(0)
            spooled.truncate()
            moved += len(entries)
    _state["pending"] = False
    return moved


def _entry(line: str) -> ReadAudit | None:
    try:
        fields = json.loads(line)
        fields["at"] = datetime.fromisoformat(fields["at"])
        return ReadAudit(**fields)
    except (ValueError, KeyError, TypeError):
        # Only a line torn by a crash in the middle of its write, which was before its answer left.
        logger.warning("read audit: a torn spool line was skipped")
        return None


def _forget_if_dead(path: Path) -> None:
    """An empty file of a process that no longer runs is removed (its pid may come back; harmless)."""
    try:
        pid = int(path.stem)
        os.kill(pid, 0)
    except ProcessLookupError:
        path.unlink(missing_ok=True)
    except (ValueError, PermissionError):
        pass
