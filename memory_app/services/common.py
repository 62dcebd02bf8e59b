"""What the memory services share: validation, record look-up, embedding texts before a write."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from collections_app.models import Agent
from ragsite.bodies import encodable
from ragsite.embedders import Embedder, EmbeddingError
from ragsite.errors import NotFound, RagsiteError

from .. import conf
from ..models import KINDS, MAX_TAGS, MAX_TEXT_LENGTH, RECORD_MODELS, TAG_MAX_LENGTH, RecallGeneration, Record
from ..nodes import FITS, runs_past_window

logger = logging.getLogger("memory_app")


QUEUED = "queued"

# What build_nodes can answer. "built", "fits", "present", "changed" and "gone" leave the record
# as it should be; "unknown" and "failed" leave it for a later repair.
BUILT, PRESENT, CHANGED, GONE, FAILED = "built", "present", "changed", "gone", "failed"
SETTLED = frozenset({BUILT, FITS, PRESENT, CHANGED, GONE})


def utc_moment(moment: datetime | None, field: str) -> datetime | None:
    """`moment` in UTC (a naive one read as UTC), or a 400 naming `field` when it has no UTC time.

    Every store compares in UTC, so the conversion happens here, where it can fail cleanly: a time a
    few hours from datetime's ends (9999-12-31T23:59:59-14:00) has none (OverflowError, once a 500
    on SQLite), and an offset PostgreSQL cannot hold (-21:31) never reaches it."""
    if moment is None:
        return None
    if timezone.is_naive(moment):
        moment = moment.replace(tzinfo=UTC)
    try:
        return moment.astimezone(UTC)
    except (OverflowError, ValueError):
        raise RagsiteError(
            f"{field} is out of range: a date and time between 0001-01-01 and 9999-12-31 in UTC",
            code=f"invalid_{field}",
        ) from None


def validate_moment(value: Any, field: str) -> datetime | None:
    """An ISO 8601 date and time (a string, or a datetime the API already parsed) in UTC, or None.

    A number is refused rather than read as a Unix time (the API and the MCP tools take the same
    strings), and so are a day that does not exist (30 February) and a time with no UTC moment:
    each a 400 `invalid_<field>` naming it."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            moment = parse_datetime(value.strip())
        except ValueError:  # well-formed but no such day or hour
            moment = None
        if moment is None:
            raise RagsiteError(
                f"{field} must be an ISO 8601 date and time that exists, such as 2026-12-05T09:00:00Z",
                code=f"invalid_{field}",
            )
        value = moment
    if not isinstance(value, datetime):
        raise RagsiteError(f"{field} must be an ISO 8601 date and time (a string)", code=f"invalid_{field}")
    return utc_moment(value, field)


def validate_validity(valid_from: Any, valid_until: Any) -> tuple[datetime | None, datetime | None]:
    """A record's validity: two optional moments, the first strictly before the second."""
    start, end = validate_moment(valid_from, "valid_from"), validate_moment(valid_until, "valid_until")
    if start is not None and end is not None and not start < end:
        raise RagsiteError("valid_from must be before valid_until", code="invalid_validity")
    return start, end


def validate_tags(tags: Any, field: str = "tags") -> list[str]:
    """At most `MAX_TAGS` distinct tags, each a string of 1 to `TAG_MAX_LENGTH` characters once its
    surrounding whitespace is trimmed, without control characters; in the order given, repeats dropped."""
    if tags is None:
        return []
    if not isinstance(tags, list | tuple):
        raise RagsiteError(f"{field} must be a list of strings", code=f"invalid_{field}")
    if len(tags) > MAX_TAGS:
        raise RagsiteError(f"{field} holds at most {MAX_TAGS} tags, not {len(tags)}", code=f"invalid_{field}")
    kept: list[str] = []
    for tag in tags:
        if not isinstance(tag, str):
            raise RagsiteError(f"each of {field} must be a string", code=f"invalid_{field}")
        tag = tag.strip()
        if not 1 <= len(tag) <= TAG_MAX_LENGTH:
            raise RagsiteError(
                f"each of {field} is 1 to {TAG_MAX_LENGTH} characters (not counting surrounding spaces)",
                code=f"invalid_{field}",
            )
        if not encodable(tag) or any(ord(c) < 32 or ord(c) == 127 for c in tag):
            raise RagsiteError(
                f"{field} must not hold control characters or lone surrogates", code=f"invalid_{field}"
            )
        if tag not in kept:
            kept.append(tag)
    return kept


def validate_kinds(kinds: Any) -> tuple[str, ...] | None:
    """Which kinds a recall searches: None (both), or a non-empty list of "mem" and "ep"."""
    if kinds is None:
        return None
    if not isinstance(kinds, list | tuple) or not kinds or any(kind not in KINDS for kind in kinds):
        raise RagsiteError(
            f"kinds must be a non-empty list of {', '.join(repr(k) for k in KINDS)}", code="invalid_kinds"
        )
    return tuple(kind for kind in KINDS if kind in kinds)


def validate_text(text: Any) -> str:
    """The text of a record, checked: a string of 1 to 16,000 characters with something in it."""
    if not isinstance(text, str):
        raise RagsiteError("text must be a string", code="invalid_text")
    if len(text) > MAX_TEXT_LENGTH:
        raise RagsiteError(
            f"text is {len(text):,} characters; a record holds at most {MAX_TEXT_LENGTH:,}",
            code="text_too_long",
        )
    if not text.strip():
        raise RagsiteError("text must not be empty", code="empty_text")
    if "\x00" in text:
        # PostgreSQL cannot store NUL in text; refusing it everywhere keeps the two stores alike.
        raise RagsiteError("text must not contain NUL characters", code="invalid_text")
    if not encodable(text):
        # A lone surrogate is valid JSON but not text: no tokenizer or UTF-8 store takes it.
        raise RagsiteError("text must not contain lone surrogates", code="invalid_text")
    return text


def validate_query(query: Any, most: Any) -> tuple[str, int]:
    """A recall query of 1 to 2,000 characters and a `most` of 1 to 50."""
    if not isinstance(query, str) or not query.strip():
        raise RagsiteError("query must be a non-empty string", code="invalid_query")
    if len(query) > conf.MAX_QUERY_LENGTH:
        raise RagsiteError(f"query is at most {conf.MAX_QUERY_LENGTH:,} characters", code="query_too_long")
    if not encodable(query):
        raise RagsiteError("query must not contain lone surrogates", code="invalid_query")
    if isinstance(most, bool) or not isinstance(most, int) or not 1 <= most <= conf.MAX_MOST:
        raise RagsiteError(f"most must be a whole number from 1 to {conf.MAX_MOST}", code="invalid_most")
    return query, most


def validate_max_chars(max_chars: Any) -> int:
    """A recall's character budget: a whole number from 1 to `conf.MAX_RECALL_CHARS`."""
    if (
        isinstance(max_chars, bool)
        or not isinstance(max_chars, int)
        or not 1 <= max_chars <= conf.MAX_RECALL_CHARS
    ):
        raise RagsiteError(
            f"max_chars must be a whole number from 1 to {conf.MAX_RECALL_CHARS:,}", code="invalid_max_chars"
        )
    return max_chars


def validate_repair_limit(limit: Any) -> int:
    """How many records one repair may build: a whole number from 0 to 50 (seed 002 §3, "at most 50")."""
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= conf.REPAIR_LIMIT:
        raise RagsiteError(
            f"limit must be a whole number from 0 to {conf.REPAIR_LIMIT}: one repair builds at most "
            f"{conf.REPAIR_LIMIT} records, and a larger backlog converges over successive runs",
            code="invalid_limit",
        )
    return limit


def record_model(kind: str) -> type[Record]:
    """The model of a record kind, "mem" or "ep"."""
    try:
        return RECORD_MODELS[kind]
    except (KeyError, TypeError):
        raise RagsiteError(
            f"kind must be one of {', '.join(KINDS)}, not {kind!r}", code="invalid_kind"
        ) from None


def get_record(*, agent: Agent, kind: str, id: int) -> Record:
    """The agent's own record; another agent's answers exactly as a missing one does."""
    record = record_model(kind).objects.filter(agent=agent, pk=id).first()
    if record is None:
        raise NotFound(f"no record {kind}:{id}", code="unknown_record")
    return record


@dataclass(frozen=True)
class _Prepared:
    """What is computed from a text before its row is written (the slow part of a write)."""

    token_count: int | None
    embedding: bytes | None
    embedding_model: str
    runs_past_window: bool


def _can_embed(embedder: Embedder) -> bool:
    return bool(embedder.dimensions)


def _vector_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def _unavailable(exc: EmbeddingError) -> RagsiteError:
    logger.warning("embedding failed while writing a memory record: %s", exc)
    return RagsiteError(
        "the embedding model could not be reached, so nothing was stored; try again",
        code="embedding_unavailable",
        status=503,
    )


def _prepare_many(texts: list[str], embedder: Embedder, *, embed: bool = True) -> list[_Prepared]:
    """Count (and with `embed`, embed) texts before their rows are written.

    `embed=False` (a store: its vector is made by a task, off the request path) leaves the vector
    empty but names the model that counted the text and will embed it, so the health check and
    the repair know the vector is still to come.
    """
    try:
        counts = [embedder.count_tokens(text) for text in texts]
        vectors = embedder.embed(texts) if embed and texts and _can_embed(embedder) else None
    except EmbeddingError as exc:
        raise _unavailable(exc) from None
    window = embedder.window
    model = embedder.model if vectors is not None or (not embed and _can_embed(embedder)) else ""
    return [
        _Prepared(
            token_count=count,
            embedding=_vector_bytes(vectors[row]) if vectors is not None else None,
            embedding_model=model,
            runs_past_window=runs_past_window(count, window),
        )
        for row, count in enumerate(counts)
    ]


# How many generations an agent's row remembers the changes of, and how many records one write
# may list (a larger write is recorded as "unknown": the next recall reads everything again).
RECENT_GENERATIONS = 64
RECENT_KEYS = 256


def raise_generation(
    agent_id: int, *, create: bool = True, changed: Iterable[tuple[str, int]] | None = None
) -> None:
    """Move the agent's recall generation on, inside the caller's transaction (see RecallGeneration).

    `changed` names the records (kind, id) this write added, changed or deleted, nodes included;
    None when the writer cannot say, which makes every process read the agent's records again.
    `create=False` on deletes: an agent's row is then only ever made by a write that adds text, and
    never while the agent itself is being deleted (its cascade deletes records, and a row made then
    would point at a deleted agent).
    """
    keys = None if changed is None else [[kind, int(id)] for kind, id in changed]
    if keys is not None and len(keys) > RECENT_KEYS:
        keys = None
    with transaction.atomic():
        # The counter is raised first: that write takes the row's lock (and SQLite's write lock)
        # before `recent` is read and written back, so two writers cannot interleave there.
        raised = RecallGeneration.objects.filter(agent_id=agent_id).update(generation=F("generation") + 1)
        if not raised:
            if not create:
                return
            RecallGeneration.objects.get_or_create(agent_id=agent_id)
            RecallGeneration.objects.filter(agent_id=agent_id).update(generation=F("generation") + 1)
        generation, recent = (
            RecallGeneration.objects.filter(agent_id=agent_id).values_list("generation", "recent").get()
        )
        recent = [*(recent or []), [generation, keys]][-RECENT_GENERATIONS:]
        RecallGeneration.objects.filter(agent_id=agent_id).update(recent=recent)


def recent_changes(agent_id: int, since: int, until: int) -> set[tuple[str, int]] | None:
    """The records changed by generations since+1 .. until, or None when any of them is not known."""
    recent = RecallGeneration.objects.filter(agent_id=agent_id).values_list("recent", flat=True).first() or []
    listed = {generation: keys for generation, keys in recent}
    changed: set[tuple[str, int]] = set()
    for generation in range(since + 1, until + 1):
        keys = listed.get(generation)
        if keys is None:
            return None
        changed.update((kind, int(id)) for kind, id in keys)
    return changed


def recall_generation(agent_id: int) -> tuple[str, int]:
    """The agent's recall (epoch, generation), making its row (at 0) when there is none yet."""
    current = RecallGeneration.objects.filter(agent_id=agent_id).values_list("epoch", "generation").first()
    if current is None:
        row = RecallGeneration.objects.get_or_create(agent_id=agent_id)[0]
        current = (row.epoch, row.generation)
    return current
