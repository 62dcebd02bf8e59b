"""Every request and answer of memory's API and MCP tools, declared once.

The API's routes take and answer these models (django-ninja validates and publishes them); the MCP
tools' input and output schemas are generated from the same models (`ragsite.schemas.tool_input`,
`json_schema_of`); tests check the services' answers against them and the field lists in docs/api.md
and docs/mcp.md. Adding a field to an answer is a field here, set where the service builds it.
"""

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Field, Schema
from pydantic import AliasChoices, BaseModel, ConfigDict

from ragsite.model_calls.rerank import RerankOut
from ragsite.schemas import StrictSchema, arguments_of

from . import conf
from .models import MAX_TAGS, MAX_TEXT_LENGTH, TAG_MAX_LENGTH
from .services.reading import DEFAULT_PAGE, MAX_PAGE
from .services.records import UNCHANGED

Kind = Literal["mem", "ep"]
NodeStatus = Literal["built", "pending", "fits", "unknown"]


# --- Requests ---


class TextIn(StrictSchema):
    # The lengths are published, not checked here: the service checks them, so an over-long text
    # gets its own code (`text_too_long`) wherever it comes from.
    text: str = Field(..., json_schema_extra={"minLength": 1, "maxLength": MAX_TEXT_LENGTH})


Tag = Annotated[str, Field(min_length=1, max_length=TAG_MAX_LENGTH)]
# A time as the API and the MCP tools take it: an ISO 8601 string (a naive one is UTC), checked by the
# service (`services.common.validate_moment`), so an impossible day or a number is `invalid_<field>` on
# both; published with the date-time format.
Moment = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


class RecordIn(TextIn):
    """A record to store: its text, and optionally its tags and when what it states holds."""

    tags: list[Tag] | None = Field(
        None,
        max_length=MAX_TAGS,
        description=f"Up to {MAX_TAGS} tags of 1-{TAG_MAX_LENGTH} characters, for recall's `tags` filter.",
    )
    valid_from: Moment | None = Field(
        None, description="ISO 8601: when what the record states began to hold (default: open)."
    )
    valid_until: Moment | None = Field(
        None, description="ISO 8601: when it stopped holding, after valid_from (default: open)."
    )


def store_arguments(request: RecordIn | dict) -> dict:
    """`services.store_memory`'s (and `archive_episode`'s) keyword arguments for a store request."""
    return arguments_of(RecordIn, request)


class RecordChangeIn(StrictSchema):
    """A change to a record's tags and validity (`PATCH /records/{kind}/{id}`, the MCP `change_record`
    tool): only the fields sent change, as a JSON merge patch reads (RFC 7396): a field left out
    keeps its value, null clears it. The text is changed by `PUT` (the API) alone."""

    model_config = ConfigDict(
        json_schema_extra={"example": {"tags": ["home"], "valid_until": "2026-12-01T00:00:00Z"}}
    )

    tags: list[Tag] | None = Field(
        None,
        max_length=MAX_TAGS,
        description=f"The record's tags, all of them (up to {MAX_TAGS} of 1-{TAG_MAX_LENGTH} characters), "
        "replacing the stored ones; [] or null removes them. Left out: unchanged.",
    )
    valid_from: Moment | None = Field(
        None,
        description="ISO 8601: when what the record states began to hold; null: open. Left out: unchanged.",
    )
    valid_until: Moment | None = Field(
        None,
        description="ISO 8601: when it stopped holding, after valid_from; null: open. Left out: unchanged.",
    )


def change_arguments(request: RecordChangeIn | dict) -> dict:
    """`services.change_record`'s keyword arguments for a change: each declared field the request
    names (sent, even as null: the API's validated body or the MCP tool's arguments) with its value,
    each other one `UNCHANGED`."""
    sent = request.model_fields_set if isinstance(request, BaseModel) else set(request)
    given = arguments_of(RecordChangeIn, request)
    return {name: value if name in sent else UNCHANGED for name, value in given.items()}


class KindIn(StrictSchema):
    """Which of the agent's records an MCP tool acts on (the API has a route for each)."""

    kind: Kind = Field("mem", description='"mem": a memory; "ep": an episode\'s summary.')


class RecordRef(StrictSchema):
    """One record, as the MCP `read_record` tool names it (the API names it in the path)."""

    kind: Kind
    id: int = Field(..., ge=1)


class RecallIn(StrictSchema):
    model_config = ConfigDict(
        json_schema_extra={"example": {"question": "What did the user say about deadlines?", "most": 5}}
    )

    # One vocabulary with collection search: `question`. `query`, its old name, is still
    # accepted (deprecated, docs/memory.md); a body with both is refused (422 naming `query`).
    question: str = Field(
        ...,
        min_length=1,
        max_length=conf.MAX_QUERY_LENGTH,
        validation_alias=AliasChoices("question", "query"),
        description="What to recall. `query` is accepted as a deprecated alias.",
    )
    most: int = Field(
        conf.DEFAULT_MOST, ge=1, le=conf.MAX_MOST, strict=True, description="At most this many excerpts."
    )
    max_chars: int | None = Field(
        None,
        ge=1,
        le=conf.MAX_RECALL_CHARS,
        strict=True,
        description="Characters the excerpts may hold in all; default MEMORY_RECALL_MAX_CHARS.",
    )
    # Filters, applied before ranking: a record they leave out is never scored, counted in the keyword
    # statistics or quoted, so the answer is that of a store holding only the records they keep.
    since: Moment | None = Field(None, description="ISO 8601: only records created at or after this time.")
    until: Moment | None = Field(None, description="ISO 8601: only records created before this time.")
    valid_at: Moment | None = Field(
        None, description="ISO 8601: only records valid at this moment (valid_from <= it < valid_until)."
    )
    kinds: list[Kind] | None = Field(
        None, min_length=1, max_length=2, description='Only these kinds: "mem", "ep" (default both).'
    )
    tags: list[Tag] | None = Field(
        None, min_length=1, max_length=MAX_TAGS, description="Only records carrying every one of these tags."
    )


def recall_arguments(request: RecallIn | dict) -> dict:
    """`services.recall`'s keyword arguments for a recall request (the API's validated body or the MCP
    tool's arguments): every declared field, `question` as the service's `query`."""
    return arguments_of(RecallIn, request, renamed={"question": "query"})


class ListQuery(Schema):
    limit: int = Field(DEFAULT_PAGE, ge=1, le=MAX_PAGE)
    cursor: str | None = Field(None, max_length=200, description="The `next` of the previous page.")
    since: datetime | None = Field(None, description="ISO 8601: records created at or after this time.")
    until: datetime | None = Field(None, description="ISO 8601: records created before this time.")


class HealthQuery(Schema):
    repair: bool = False
    limit: int = Field(conf.REPAIR_LIMIT, ge=0, le=conf.REPAIR_LIMIT)


# --- Answers ---


class NodesStatus(Schema):
    status: Literal["queued"]


class StoredOut(Schema):
    id: int
    kind: Kind
    text_length: int
    nodes: NodesStatus | None = None  # present only when the record runs past the window


class ChangedOut(Schema):
    """A record after a change of its tags and validity."""

    id: int
    kind: Kind
    tags: list[str]
    valid_from: datetime | None
    valid_until: datetime | None
    updated_at: datetime


class NodeRange(Schema):
    first: int
    last: int


class RecordKey(Schema):
    kind: Kind
    id: int


class ExcerptOut(Schema):
    kind: Kind
    id: int
    score: float
    text: str
    start: int
    end: int
    nodes: NodeRange | Literal["pending"] | None = Field(
        ...,
        description="The nodes it covers; null: a record quoted without nodes (it fits the window, or "
        'cannot be counted); "pending": the opening of a record whose nodes are being built.',
    )
    record_length: int
    cut: bool
    superseded_by: RecordKey | None = Field(
        ...,
        description="The record of another excerpt in this answer, placed before this one, that states the "
        "same thing with another value and is newer (valid from, else created, later): this excerpt is "
        "out of date. Null otherwise.",
    )


class RecallOut(Schema):
    excerpts: list[ExcerptOut]
    chars: int
    max_chars: int
    cut: bool
    rerank: RerankOut = Field(
        ..., description="Whether the optional reranker ordered the excerpts (RERANK_URL)."
    )


class NodeItem(Schema):
    node_index: int
    start: int
    end: int
    token_count: int


class RecordNodes(Schema):
    status: NodeStatus
    items: list[NodeItem]


class RecordOut(Schema):
    kind: Kind
    id: int
    text: str
    text_length: int
    token_count: int | None
    created_at: datetime
    updated_at: datetime
    valid_from: datetime | None
    valid_until: datetime | None
    tags: list[str]
    locked: bool
    nodes: RecordNodes


class ListedOut(Schema):
    kind: Kind
    id: int
    text_length: int
    opening: str
    created_at: datetime
    updated_at: datetime
    valid_from: datetime | None
    valid_until: datetime | None
    tags: list[str]
    locked: bool
    nodes: NodeStatus


class ListOut(Schema):
    records: list[ListedOut]
    next: str | None


class NodeOut(Schema):
    kind: Kind
    id: int
    node_index: int
    text: str
    start: int
    end: int
    token_count: int
    window: int
    embedding_model: str


class MissingNodes(Schema):
    kind: Kind
    id: int
    reason: Literal["missing", "stale"]


class HealthOut(Schema):
    """The health check; the fields after `missing_vectors` come only where they apply."""

    model: str
    window: int | None
    can_divide: bool
    records: int
    long_records: int
    unknown_length: int
    missing_nodes: int
    stale_nodes: int
    missing: list[MissingNodes] = Field(..., description="The first records needing nodes, oldest first.")
    missing_triggers: list[str]
    missing_truncated: bool
    missing_vectors: int
    error: str | None = Field(None, description="Set when the survey could not count some records.")
    orphan_nodes: int | None = Field(None, description="The whole store's check only.")
    vectors: list[dict[str, Any]] | None = Field(None, description="With repair: the vectors embedded.")
    repaired: list[dict[str, Any]] | None = Field(None, description="With repair: the records' nodes built.")
    remaining: int | None = Field(None, description="With repair: records still needing nodes.")
    orphans_removed: int | None = Field(None, description="The whole store's repair only.")
