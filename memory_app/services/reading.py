"""Reading an agent's records: one record whole with its nodes, and its memories or episodes listed.

Everything is the calling agent's own; another agent's record answers exactly as a missing one.
"""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime

from django.db.models import Q
from django.utils.dateparse import parse_datetime

from collections_app.models import Agent
from ragsite import embedding
from ragsite.errors import RagsiteError

from .. import conf
from ..models import Record, RecordNode
from .common import get_record, record_model, utc_moment
from .nodes import NODES_CURRENT, NODES_MISSING, NODES_NOT_NEEDED, NODES_STALE, NodeState, _node_state
from .recall import opening

# A list page holds at most this many records.
MAX_PAGE = 100
DEFAULT_PAGE = 20

# What a record's `nodes.status` says.
BUILT, PENDING, FITS, UNKNOWN = "built", "pending", "fits", "unknown"
_STATUS = {NODES_CURRENT: BUILT, NODES_STALE: PENDING, NODES_MISSING: PENDING, NODES_NOT_NEEDED: FITS}


def status_of(state: NodeState) -> str:
    """`built` (nodes of the current model), `pending` (queued or being rebuilt), `fits` (needs none),
    `unknown` (the embedder cannot count it, so none will be built)."""
    return _STATUS.get(state.state, UNKNOWN)


def _states(records: list[Record]) -> dict[tuple[str, int], NodeState]:
    """Each record's node state, with one node query per kind."""
    embedder = embedding.get_embedder()
    held: dict[tuple[str, int], list[RecordNode]] = {}
    for kind in {record.KIND for record in records}:
        ids = [record.pk for record in records if record.KIND == kind]
        for node in RecordNode.objects.filter(parent_kind=kind, parent_id__in=ids).order_by(
            "parent_id", "node_index"
        ):
            held.setdefault((kind, node.parent_id), []).append(node)
    return {(r.KIND, r.pk): _node_state(r, held.get((r.KIND, r.pk), []), embedder) for r in records}


def read_record(*, agent: Agent, kind: str, id: int) -> dict:
    """One of the agent's records whole: text, lengths, times, locked, and its nodes with their offsets."""
    record = get_record(agent=agent, kind=kind, id=id)
    state = _states([record])[(record.KIND, record.pk)]
    status = status_of(state)
    return {
        "kind": record.KIND,
        "id": record.pk,
        "text": record.text,
        "text_length": len(record.text),
        "token_count": state.tokens,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "valid_from": record.valid_from,
        "valid_until": record.valid_until,
        "tags": list(record.tags or []),
        "locked": record.locked,
        "nodes": {
            "status": status,
            # Only nodes of the current model are listed: others are about to be replaced.
            "items": [
                {
                    "node_index": n.node_index,
                    "start": n.start_char,
                    "end": n.end_char,
                    "token_count": n.token_count,
                }
                for n in state.nodes
            ]
            if status == BUILT
            else [],
        },
    }


def _cursor(created_at: datetime, id: int) -> str:
    raw = json.dumps([created_at.isoformat(), id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _after(cursor: str) -> tuple[datetime, int]:
    """The (created_at, id) a cursor continues after; a cursor this code did not write is refused."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        when, id = json.loads(raw)
        created_at = parse_datetime(when)
        if created_at is None or isinstance(id, bool) or not isinstance(id, int):
            raise ValueError(cursor)
        created_at = utc_moment(created_at, "cursor")
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError, RagsiteError):
        raise RagsiteError("cursor is not one this list gave out", code="invalid_cursor") from None
    return created_at, id


def list_records(
    *,
    agent: Agent,
    kind: str,
    limit: int = DEFAULT_PAGE,
    cursor: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> dict:
    """The agent's records of one kind, newest first (by created_at, then id), a page at a time.

    `since` keeps records created at or after it, `until` those created before it (a naive time is
    UTC). `next` is the cursor of the following page, null on the last. Each record comes with its
    length, times, locked flag, node status and its opening; `GET /records/{kind}/{id}` reads it whole.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE:
        raise RagsiteError(f"limit must be a whole number from 1 to {MAX_PAGE}", code="invalid_limit")
    rows = record_model(kind).objects.filter(agent=agent)
    since, until = utc_moment(since, "since"), utc_moment(until, "until")
    if since is not None:
        rows = rows.filter(created_at__gte=since)
    if until is not None:
        rows = rows.filter(created_at__lt=until)
    if cursor:
        created_at, id = _after(cursor)
        rows = rows.filter(Q(created_at__lt=created_at) | Q(created_at=created_at, pk__lt=id))
    page = list(rows.order_by("-created_at", "-pk")[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    states = _states(page)
    return {
        "records": [
            {
                "kind": record.KIND,
                "id": record.pk,
                "text_length": len(record.text),
                "opening": record.text[slice(*opening(record.text, conf.OPENING_LENGTH))],
                "created_at": record.created_at,
                "updated_at": record.updated_at,
                "valid_from": record.valid_from,
                "valid_until": record.valid_until,
                "tags": list(record.tags or []),
                "locked": record.locked,
                "nodes": status_of(states[(record.KIND, record.pk)]),
            }
            for record in page
        ],
        "next": _cursor(page[-1].created_at, page[-1].pk) if more else None,
    }


# The read audit's target for a recall, which searches both kinds.
RECALLED = "mem+ep"

# What each read quotes, for the read audit (`ragsite.audit`): the records' ids as `<kind>:<id>`, and
# the characters of their text the answer carries.


def record_quoted(record: dict) -> tuple[list[str], int]:
    return [f"{record['kind']}:{record['id']}"], len(record["text"])


def listing_quoted(page: dict) -> tuple[list[str], int]:
    records = page["records"]
    return [f"{r['kind']}:{r['id']}" for r in records], sum(len(r["opening"]) for r in records)


def recall_quoted(answer: dict) -> tuple[list[str], int]:
    excerpts = answer["excerpts"]
    return [f"{e['kind']}:{e['id']}" for e in excerpts], sum(len(e["text"]) for e in excerpts)
