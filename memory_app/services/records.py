"""Storing, changing, deleting, exporting and importing memories and episodes."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from collections_app.models import Agent
from ragsite import embedding, queue, tracing
from ragsite.errors import Conflict, NotFound, RagsiteError

from ..models import KINDS, RECORD_MODELS, Episode, Memory, Record
from .common import (
    QUEUED,
    _prepare_many,
    get_record,
    raise_generation,
    record_model,
    utc_moment,
    validate_moment,
    validate_tags,
    validate_text,
    validate_validity,
)

logger = logging.getLogger("memory_app")


def _queue_nodes(kind: str, id: int) -> None:
    """Enqueue `build_record_nodes` once the surrounding transaction commits."""

    def enqueue() -> None:
        queue.enqueue("memory_app.tasks.build_record_nodes", kind, id, name=f"nodes-{kind}-{id}")

    # robust: a broker that is down must not turn a stored record into an error; the health
    # repair finds long records without nodes and builds them later.
    transaction.on_commit(tracing.keeping_context(enqueue), robust=True)


def _queue_vector(kind: str, id: int) -> None:
    """Enqueue `embed_record_vector` once the surrounding transaction commits (robust, as nodes are)."""

    def enqueue() -> None:
        queue.enqueue("memory_app.tasks.embed_record_vector", kind, id, name=f"vector-{kind}-{id}")

    transaction.on_commit(tracing.keeping_context(enqueue), robust=True)


def _store(
    model: type[Record],
    agent: Agent,
    text: str,
    tags: list[str] | None = None,
    valid_from: datetime | str | None = None,
    valid_until: datetime | str | None = None,
) -> tuple[Record, dict | None]:
    """Count the text, write the row, and queue its vector (and its nodes, when it runs past the window).

    Everything is checked before anything is counted or written: a bad tag or time is a 400 and
    nothing is stored.

    The vector is made by a task, not here: embedding on the request path cost a store 0.2-0.6 s
    while node builds shared the cores (docs/decisions/0013). Until the task runs, recall scores
    the record by its words alone; the health repair embeds any whose task never ran.
    """
    text = validate_text(text)
    tags = validate_tags(tags)
    valid_from, valid_until = validate_validity(valid_from, valid_until)
    embedder = embedding.get_embedder()
    (prepared,) = _prepare_many([text], embedder, embed=False)
    with transaction.atomic():
        record = model.objects.create(
            agent=agent,
            text=text,
            tags=tags,
            valid_from=valid_from,
            valid_until=valid_until,
            token_count=prepared.token_count,
            embedding=None,
            embedding_model=prepared.embedding_model,
        )
        if prepared.embedding_model:
            _queue_vector(model.KIND, record.pk)
        if prepared.runs_past_window:
            _queue_nodes(model.KIND, record.pk)
    return record, ({"status": QUEUED} if prepared.runs_past_window else None)


def store_memory(
    *,
    agent: Agent,
    text: str,
    tags: list[str] | None = None,
    valid_from: datetime | str | None = None,
    valid_until: datetime | str | None = None,
) -> tuple[Memory, dict | None]:
    """Store a memory, with optional tags and validity; returns it and `{"status": "queued"}` when its
    nodes were queued, else None."""
    record, nodes = _store(Memory, agent, text, tags, valid_from, valid_until)
    return cast(Memory, record), nodes


def archive_episode(
    *,
    agent: Agent,
    text: str,
    tags: list[str] | None = None,
    valid_from: datetime | str | None = None,
    valid_until: datetime | str | None = None,
) -> tuple[Episode, dict | None]:
    """Archive an episode's summary; answers like `store_memory`."""
    record, nodes = _store(Episode, agent, text, tags, valid_from, valid_until)
    return cast(Episode, record), nodes


def _locked_refusal(record: Record) -> Conflict:
    return Conflict(f"record {record.KIND}:{record.pk} is locked", code="record_locked")


def _writable_record(*, agent: Agent, kind: str, id: int) -> Record:
    """The agent's record, row-locked for this transaction; refused when missing or locked.

    The row lock keeps a node build from writing for an old text in between (PostgreSQL;
    SQLite's IMMEDIATE transactions already serialise writers).
    """
    record = record_model(kind).objects.select_for_update().filter(agent=agent, pk=id).first()
    if record is None:
        raise NotFound(f"no record {kind}:{id}", code="unknown_record")
    if record.locked:
        raise _locked_refusal(record)
    return record


def update_text(*, agent: Agent, kind: str, id: int, text: str) -> tuple[Record, dict | None]:
    """Replace a record's text; its nodes go (the trigger) and new ones are queued when it is long.

    As a store does, the change counts the new text and writes it, and its vector is made by a task
    (`embed_record_vector`) queued when the row commits: until then recall scores the record by its
    words alone (the old vector described the old text and is dropped with it). The same text again
    changes nothing. A locked record is refused (409).
    """
    text = validate_text(text)
    record = get_record(agent=agent, kind=kind, id=id)
    if record.locked:
        raise _locked_refusal(record)
    if record.text == text:
        return record, None
    (prepared,) = _prepare_many([text], embedding.get_embedder(), embed=False)
    with transaction.atomic():
        record = _writable_record(agent=agent, kind=kind, id=id)
        record.text = text
        record.token_count = prepared.token_count
        record.embedding = None
        record.embedding_model = prepared.embedding_model
        record.updated_at = timezone.now()
        record.save(update_fields=["text", "token_count", "embedding", "embedding_model", "updated_at"])
        if prepared.embedding_model:
            _queue_vector(kind, record.pk)
        if prepared.runs_past_window:
            _queue_nodes(kind, record.pk)
    return record, ({"status": QUEUED} if prepared.runs_past_window else None)


class _Unchanged:
    """The value of a field a change does not name (distinct from None, which clears it)."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Any = _Unchanged()


def change_record(
    *,
    agent: Agent,
    kind: str,
    id: int,
    tags: list[str] | None = UNCHANGED,
    valid_from: datetime | str | None = UNCHANGED,
    valid_until: datetime | str | None = UNCHANGED,
) -> Record:
    """Change a record's tags and validity, leaving its text, vector and nodes alone.

    Only the fields given change (`UNCHANGED` is a field not given): `tags` replaces the stored tags
    whole (None or [] removes them), `valid_from`/`valid_until` set that end (None opens it). Every
    value is checked as a store checks it, and the validity that results (a given end with the
    stored other) must still start before it ends; a bad value is a 400 naming it and nothing is
    written. A change naming no field is refused (`empty_change`); a locked record is refused (409),
    as its text is; another agent's record is a 404 like a missing one. The recall index reads the
    record again on its next recall (the save raises the agent's recall generation).
    """
    given = {
        name: value
        for name, value in (("tags", tags), ("valid_from", valid_from), ("valid_until", valid_until))
        if value is not UNCHANGED
    }
    if not given:
        raise RagsiteError(
            "name at least one of tags, valid_from, valid_until to change", code="empty_change"
        )
    if "tags" in given:
        given["tags"] = validate_tags(given["tags"])
    for end in ("valid_from", "valid_until"):
        if end in given:
            given[end] = validate_moment(given[end], end)
    with transaction.atomic():
        record = _writable_record(agent=agent, kind=kind, id=id)
        start = given.get("valid_from", record.valid_from)
        finish = given.get("valid_until", record.valid_until)
        if start is not None and finish is not None and not start < finish:
            raise RagsiteError(
                f"valid_from ({start.isoformat()}) must be before valid_until ({finish.isoformat()})",
                code="invalid_validity",
            )
        for name, value in given.items():
            setattr(record, name, value)
        record.updated_at = timezone.now()
        record.save(update_fields=[*given, "updated_at"])
    return record


def changed_answer(record: Record) -> dict:
    """What a change of tags and validity answers (`schemas.ChangedOut`)."""
    return {
        "id": record.pk,
        "kind": record.KIND,
        "tags": record.tags,
        "valid_from": record.valid_from,
        "valid_until": record.valid_until,
        "updated_at": record.updated_at,
    }


def delete_record(*, agent: Agent, kind: str, id: int) -> None:
    """Delete one of the agent's records (its nodes go with it, by trigger). A locked record is refused."""
    with transaction.atomic():
        _writable_record(agent=agent, kind=kind, id=id).delete()


def export_records(*, agent: Agent) -> Iterator[dict]:
    """The agent's records as JSON-ready dicts, oldest first. Nodes are not exported: they are derived."""
    rows: list[tuple[datetime, str, int, dict]] = []
    for kind, model in RECORD_MODELS.items():
        for pk, text, locked, created_at, tags, valid_from, valid_until in model.objects.filter(
            agent=agent
        ).values_list("pk", "text", "locked", "created_at", "tags", "valid_from", "valid_until"):
            item = {"kind": kind, "text": text, "locked": locked, "created_at": created_at.isoformat()}
            # Written only when set, so a file of records without them reads as before.
            if tags:
                item["tags"] = tags
            if valid_from is not None:
                item["valid_from"] = valid_from.isoformat()
            if valid_until is not None:
                item["valid_until"] = valid_until.isoformat()
            rows.append((created_at, kind, pk, item))
    rows.sort(key=lambda row: row[:3])
    for *_key, item in rows:
        yield item


@dataclass(frozen=True)
class _ImportItem:
    kind: str
    text: str
    locked: bool
    created_at: datetime | None
    tags: list[str]
    valid_from: datetime | None
    valid_until: datetime | None


def _parse_import_line(number: int, line: str) -> _ImportItem | None:
    def refuse(why: str) -> RagsiteError:
        return RagsiteError(f"line {number}: {why}; nothing was imported", code="invalid_import")

    if not line.strip():
        return None
    try:
        item = json.loads(line)
    except ValueError:
        raise refuse("not valid JSON") from None
    if not isinstance(item, dict):
        raise refuse("not a JSON object")
    kind = item.get("kind", "mem")
    if kind not in KINDS:
        raise refuse(f"kind must be one of {', '.join(KINDS)}")
    try:
        text = validate_text(item.get("text"))
    except RagsiteError as exc:
        raise refuse(exc.message) from None
    locked = item.get("locked", False)
    if not isinstance(locked, bool):
        raise refuse("locked must be true or false")
    created_at = None
    if item.get("created_at") is not None:
        try:
            created_at = parse_datetime(item["created_at"]) if isinstance(item["created_at"], str) else None
            created_at = utc_moment(created_at, "created_at")
        except (ValueError, RagsiteError):  # no such day (30 February), or no UTC moment
            created_at = None
        if created_at is None:
            raise refuse("created_at must be an ISO 8601 date and time that exists")
    try:
        tags = validate_tags(item.get("tags"))
        valid_from, valid_until = validate_validity(item.get("valid_from"), item.get("valid_until"))
    except RagsiteError as exc:
        raise refuse(exc.message) from None
    return _ImportItem(kind, text, locked, created_at, tags, valid_from, valid_until)


def import_records(*, agent: Agent, lines: Iterable[str]) -> dict:
    """Import JSON lines written by `export_records` into `agent`'s store, all or nothing.

    Every line is checked before anything is embedded or written; a bad line refuses the whole
    file, naming the line. Records get new ids. Long records have their nodes queued, as a store
    would. Returns how many memories and episodes were imported and how many builds were queued.
    """
    items = [item for number, line in enumerate(lines, start=1) if (item := _parse_import_line(number, line))]
    prepared = _prepare_many([item.text for item in items], embedding.get_embedder())
    now = timezone.now()
    counts = {"memories": 0, "episodes": 0, "nodes_queued": 0}
    with transaction.atomic():
        raise_generation(agent.pk)  # bulk_create sends no post_save
        for kind, model in RECORD_MODELS.items():
            chosen = [(item, prep) for item, prep in zip(items, prepared, strict=True) if item.kind == kind]
            created = model.objects.bulk_create(
                model(
                    agent=agent,
                    text=item.text,
                    locked=item.locked,
                    tags=item.tags,
                    valid_from=item.valid_from,
                    valid_until=item.valid_until,
                    token_count=prep.token_count,
                    embedding=prep.embedding,
                    embedding_model=prep.embedding_model,
                    created_at=item.created_at or now,
                    updated_at=now,
                )
                for item, prep in chosen
            )
            counts["memories" if kind == Memory.KIND else "episodes"] += len(created)
            for record, (_item, prep) in zip(created, chosen, strict=True):
                if prep.runs_past_window:
                    _queue_nodes(kind, record.pk)
                    counts["nodes_queued"] += 1
    return counts
