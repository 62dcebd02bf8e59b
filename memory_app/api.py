"""Memory in the JSON API (mounted at /api/v1/memory): thin adapters over `memory_app.services`.

The calling agent is the API key's agent; another agent's record answers 404 like a missing one.
Lengths are declared in the schema for the OpenAPI document; the text limit itself is checked by
the service, so an over-long text gets its own code (`text_too_long`) wherever it comes from.
"""

from datetime import datetime
from functools import wraps
from typing import Literal

from django.http import JsonResponse
from ninja import Field, Query, Router, Schema, Status
from pydantic import AliasChoices, ConfigDict

from ragsite import audit
from ragsite.errors import RagsiteError
from ragsite.schemas import StrictSchema, with_errors

from . import conf, services
from .models import MAX_TEXT_LENGTH
from .services.reading import RECALLED, listing_quoted, recall_quoted, record_quoted

router = Router(tags=["memory"])

Kind = Literal["mem", "ep"]


class TextIn(StrictSchema):
    text: str = Field(..., json_schema_extra={"minLength": 1, "maxLength": MAX_TEXT_LENGTH})


class NodesStatus(Schema):
    status: Literal["queued"]


class StoredOut(Schema):
    id: int
    kind: Kind
    text_length: int
    nodes: NodesStatus | None = None  # present only when the record runs past the window


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
    most: int = Field(conf.DEFAULT_MOST, ge=1, le=conf.MAX_MOST, strict=True)
    max_chars: int | None = Field(
        None,
        ge=1,
        le=conf.MAX_RECALL_CHARS,
        strict=True,
        description="Characters the excerpts may hold in all; default MEMORY_RECALL_MAX_CHARS.",
    )


class NodeRange(Schema):
    first: int
    last: int


class ExcerptOut(Schema):
    kind: Kind
    id: int
    score: float
    text: str
    start: int
    end: int
    # The nodes it covers; null: a record quoted without nodes (it fits the window, or cannot be
    # counted); "pending": the opening of a record whose nodes are being built.
    nodes: NodeRange | Literal["pending"] | None
    record_length: int
    cut: bool


class RecallOut(Schema):
    excerpts: list[ExcerptOut]
    chars: int
    max_chars: int
    cut: bool
    # {"status": "not configured" | "nothing to rerank" | "unavailable" | "reranked", "model"?, "depth"?}
    rerank: dict = Field(..., description="Whether the optional reranker ordered the excerpts (RERANK_URL).")


class NodeItem(Schema):
    node_index: int
    start: int
    end: int
    token_count: int


NodeStatus = Literal["built", "pending", "fits", "unknown"]


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
    locked: bool
    nodes: RecordNodes


class ListedOut(Schema):
    kind: Kind
    id: int
    text_length: int
    opening: str
    created_at: datetime
    updated_at: datetime
    locked: bool
    nodes: NodeStatus


class ListOut(Schema):
    records: list[ListedOut]
    next: str | None


class ListQuery(Schema):
    limit: int = Field(services.reading.DEFAULT_PAGE, ge=1, le=services.reading.MAX_PAGE)
    cursor: str | None = Field(None, max_length=200)
    since: datetime | None = None
    until: datetime | None = None


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


class HealthQuery(Schema):
    repair: bool = False
    limit: int = Field(conf.REPAIR_LIMIT, ge=0, le=conf.REPAIR_LIMIT)


def _quiet(view):
    """A read that misses (404) or finds nodes pending (409) is an answer, not a WARNING log line."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except RagsiteError as exc:
            if exc.status not in (404, 409):
                raise
            response = JsonResponse(exc.as_dict(), status=exc.status, headers=exc.headers)
            response._has_been_logged = True  # what django.request checks before logging a 4xx
            return response

    return wrapped


def _stored(record, nodes: dict | None) -> dict:
    answer = {"id": record.pk, "kind": record.KIND, "text_length": len(record.text)}
    if nodes is not None:
        answer["nodes"] = nodes
    return answer


@router.post(
    "/memories",
    response=with_errors({201: StoredOut}, 413, 429, 503),
    exclude_none=True,
    summary="Store a memory",
)
def store_memory(request, payload: TextIn):
    record, nodes = services.store_memory(agent=request.auth.agent, text=payload.text)
    return Status(201, _stored(record, nodes))


@router.post(
    "/episodes",
    response=with_errors({201: StoredOut}, 413, 429, 503),
    exclude_none=True,
    summary="Archive an episode",
)
def archive_episode(request, payload: TextIn):
    record, nodes = services.archive_episode(agent=request.auth.agent, text=payload.text)
    return Status(201, _stored(record, nodes))


@router.post(
    "/recall",
    response=with_errors({200: RecallOut}, 413, 429, 503),
    summary="Recall the excerpts of your records that best answer a question, within a character budget",
)
def recall_records(request, payload: RecallIn):
    with audit.reading(
        kind=audit.RECALL, channel=audit.API, key=request.auth, target=RECALLED, question=payload.question
    ) as read:
        answer = services.recall(
            agent=request.auth.agent, query=payload.question, most=payload.most, max_chars=payload.max_chars
        )
        read.answered(*recall_quoted(answer))
    return answer


@router.get(
    "/nodes/{kind}/{id}/{index}",
    response=with_errors({200: NodeOut}, 404, 409),
    summary="One node of a record",
)
@_quiet
def read_node(request, kind: Kind, id: int, index: int):
    return services.get_node(agent=request.auth.agent, kind=kind, id=id, index=index)


@router.get(
    "/records/{kind}/{id}",
    response=with_errors({200: RecordOut}, 404),
    summary="One record whole, with its nodes",
)
@_quiet
def read_record(request, kind: Kind, id: int):
    with audit.reading(kind=audit.RECORD, channel=audit.API, key=request.auth, target=kind) as read:
        record = services.read_record(agent=request.auth.agent, kind=kind, id=id)
        read.answered(*record_quoted(record))
    return record


def _listed(request, kind: str, params) -> dict:
    with audit.reading(kind=audit.RECORDS, channel=audit.API, key=request.auth, target=kind) as read:
        page = services.list_records(agent=request.auth.agent, kind=kind, **params.dict())
        read.answered(*listing_quoted(page))
    return page


@router.get("/memories", response=with_errors({200: ListOut}), summary="Your memories, newest first")
def list_memories(request, params: Query[ListQuery]):
    return _listed(request, "mem", params)


@router.get("/episodes", response=with_errors({200: ListOut}), summary="Your episodes, newest first")
def list_episodes(request, params: Query[ListQuery]):
    return _listed(request, "ep", params)


@router.get(
    "/health",
    response=with_errors({200: dict}),
    summary="Long records without nodes; ?repair=true builds up to `limit` of them",
)
def memory_health(request, params: Query[HealthQuery]):
    return services.check_health(agent=request.auth.agent, repair=params.repair, limit=params.limit)


@router.put(
    "/records/{kind}/{id}",
    response=with_errors({200: StoredOut}, 404, 413, 503),
    exclude_none=True,
    summary="Replace a record's text",
)
def update_record(request, kind: Kind, id: int, payload: TextIn):
    record, nodes = services.update_text(agent=request.auth.agent, kind=kind, id=id, text=payload.text)
    return _stored(record, nodes)


@router.delete(
    "/records/{kind}/{id}", response=with_errors({204: None}, 404), summary="Delete a record and its nodes"
)
def delete_record(request, kind: Kind, id: int):
    services.delete_record(agent=request.auth.agent, kind=kind, id=id)
    return Status(204, None)
