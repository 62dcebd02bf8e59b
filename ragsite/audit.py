"""The read audit's floor: every adapter that answers text wraps its service call in `reading(...)`.

One entry per read: who (agent, key, `onBehalfOf`, reader), what (the kind of read, the collection or
memory kind, the question), what came back (the ids quoted and the characters of text), and how it
ended (the HTTP status, or the one a tool error stands for). The entry is written before the adapter
returns, so an answer that reached its caller always has its entry: a failed write fails the read.

The floor imports no app: the app that owns the store installs the writer with `set_writer` at start
(collections_app's AppConfig.ready), and both apps' adapters call `reading`.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

from ragsite.errors import RagsiteError, store_busy
from ragsite.instruments import READS

logger = logging.getLogger("ragsite.audit")

# What `AUDIT_QUESTIONS` may be: the question as asked, its SHA-256 only, or nothing.
QUESTION_MODES = ("text", "hash", "off")

# The kinds of read, one per text-returning operation (a column the admin filters on).
SEARCH = "search"
PARAGRAPH = "paragraph"
VECTOR_STORE_SEARCH = "vector_store_search"
RECALL = "recall"
RECORD = "record"
RECORDS = "records"
KINDS = (SEARCH, PARAGRAPH, VECTOR_STORE_SEARCH, RECALL, RECORD, RECORDS)

# Where the read came in: an agent's key (the API, MCP, the OpenAI-shaped routes) or a person in the admin.
API, MCP, OPENAI, DIFY, ADMIN = "api", "mcp", "openai", "dify", "admin"
CHANNELS = (API, MCP, OPENAI, DIFY, ADMIN)


@dataclass
class Read:
    """One read as the adapter saw it; `answered` fills in what came back."""

    kind: str
    channel: str
    agent_id: str
    key_id: int | None
    target: str
    question: str | None = None
    reader: str | None = None
    on_behalf_of: str | None = None
    staff: str = ""  # the person, for a read made in the admin
    ids: list[str] = field(default_factory=list)
    size: int = 0
    status: int = 200

    def answered(self, ids: Iterable[str], size: int) -> None:
        self.ids = [str(i) for i in ids]
        self.size = int(size)


Writer = Callable[[Read], None]
_writer: Writer | None = None


def set_writer(writer: Writer) -> None:
    """Install where entries go (the store's audit table); called once by the app that owns it."""
    global _writer
    _writer = writer


def _storable(text: str | None) -> str | None:
    """PostgreSQL's text holds no NUL: a hostile name or question is recorded with U+FFFD in its place
    (SQLite's copy alike), so the entry is written and the read answers as it would unrecorded."""
    return None if text is None else text.replace("\x00", "\ufffd")


def write(read: Read) -> None:
    for name in ("target", "question", "reader", "on_behalf_of", "staff"):
        setattr(read, name, _storable(getattr(read, name)))
    read.ids = [_storable(i) for i in read.ids]
    READS.labels(kind=read.kind, channel=read.channel, status=str(read.status)).inc()
    if _writer is None:
        # A read that cannot be recorded is not served: no silent gap in the trail.
        raise ImproperlyConfigured("no read-audit writer is installed (collections_app must be installed)")
    _writer(read)


@contextmanager
def reading(
    *,
    kind: str,
    channel: str,
    key: Any,
    target: str,
    question: str | None = None,
    reader: str | None = None,
    on_behalf_of: str | None = None,
    agent_id: str | None = None,
    staff: str = "",
) -> Iterator[Read]:
    """Record one read around the block: its status from the refusal it raised (500 for anything
    else), written before the block's answer leaves the adapter. `key` is the caller's agent key
    (`.pk`, `.agent.agent_id`); a read made in the admin has none, and names the agent whose
    collection it read (`agent_id`) and the person (`staff`)."""
    read = Read(
        kind=kind,
        channel=channel,
        agent_id=key.agent.agent_id if key is not None else str(agent_id or ""),
        key_id=key.pk if key is not None else None,
        target=target or "",
        question=question,
        reader=reader,
        on_behalf_of=on_behalf_of,
        staff=staff,
    )
    try:
        yield read
    except RagsiteError as exc:
        read.status = exc.status
        write(read)
        raise
    except Exception as exc:
        busy = store_busy(exc)
        read.status = 500 if busy is None else busy.status
        try:
            write(read)
        except DatabaseError:
            # The store itself failed the read (and may refuse this write too, in the same aborted
            # transaction): the read's own error is what the caller gets, and it carried no text.
            logger.warning(
                "read audit: the entry of a %s read that failed in the store was not written", kind
            )
        raise
    write(read)


def question_fields(question: str | None, mode: str) -> tuple[str, str]:
    """(question kept, its SHA-256 hex) under `AUDIT_QUESTIONS` = `mode`."""
    if mode not in QUESTION_MODES:
        raise ImproperlyConfigured(
            f"AUDIT_QUESTIONS must be one of {', '.join(QUESTION_MODES)}, not {mode!r}"
        )
    if question is None or mode == "off":
        return "", ""
    digest = hashlib.sha256(question.encode("utf-8", "surrogatepass")).hexdigest()
    return (question if mode == "text" else ""), digest
