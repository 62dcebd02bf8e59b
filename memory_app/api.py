"""Memory in the JSON API (mounted at /api/v1/memory): thin adapters over `memory_app.services`.

The calling agent is the API key's agent; another agent's record answers 404 like a missing one.
Lengths are declared in the schema for the OpenAPI document; the text limit itself is checked by
the service, so an over-long text gets its own code (`text_too_long`) wherever it comes from.
"""

from typing import Literal

from ninja import Field, Query, Router, Schema, Status
from pydantic import AliasChoices, ConfigDict

from ragsite.schemas import StrictSchema, with_errors

from . import conf, services
from .models import MAX_TEXT_LENGTH

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
    model_config = ConfigDict(json_schema_extra={"example": {"question": "What did the user say about deadlines?",
                                                             "most": 5}})

    # One vocabulary with collection search: `question`. `query`, its old name, is still
    # accepted (deprecated, docs/memory.md); a body with both is refused (422 naming `query`).
    question: str = Field(
        ..., min_length=1, max_length=conf.MAX_QUERY_LENGTH, validation_alias=AliasChoices("question", "query"),
        description="What to recall. `query` is accepted as a deprecated alias.",
    )
    most: int = Field(conf.DEFAULT_MOST, ge=1, le=conf.MAX_MOST, strict=True)


class ExcerptOut(Schema):
    text: str
    node_index: int | None  # null: the record's opening (it has no nodes yet, or fits the window)
    start: int
    end: int


class RecalledOut(Schema):
    kind: Kind
    id: int
    score: float
    excerpt: ExcerptOut


class RecallOut(Schema):
    records: list[RecalledOut]


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


def _stored(record, nodes: dict | None) -> dict:
    answer = {"id": record.pk, "kind": record.KIND, "text_length": len(record.text)}
    if nodes is not None:
        answer["nodes"] = nodes
    return answer


@router.post("/memories", response=with_errors({201: StoredOut}, 413, 429, 503), exclude_none=True, summary="Store a memory")
def store_memory(request, payload: TextIn):
    record, nodes = services.store_memory(agent=request.auth.agent, text=payload.text)
    return Status(201, _stored(record, nodes))


@router.post("/episodes", response=with_errors({201: StoredOut}, 413, 429, 503), exclude_none=True, summary="Archive an episode")
def archive_episode(request, payload: TextIn):
    record, nodes = services.archive_episode(agent=request.auth.agent, text=payload.text)
    return Status(201, _stored(record, nodes))


@router.post("/recall", response=with_errors({200: RecallOut}, 413, 429, 503), summary="Recall records, each quoted by its most relevant node")
def recall_records(request, payload: RecallIn):
    return {"records": services.recall(agent=request.auth.agent, query=payload.question, most=payload.most)}


@router.get("/nodes/{kind}/{id}/{index}", response=with_errors({200: NodeOut}, 404), summary="One node of a record")
def read_node(request, kind: Kind, id: int, index: int):
    return services.get_node(agent=request.auth.agent, kind=kind, id=id, index=index)


@router.get("/health", response=with_errors({200: dict}), summary="Long records without nodes; ?repair=true builds up to `limit` of them")
def memory_health(request, params: Query[HealthQuery]):
    return services.check_health(agent=request.auth.agent, repair=params.repair, limit=params.limit)


@router.put("/records/{kind}/{id}", response=with_errors({200: StoredOut}, 404, 413, 503), exclude_none=True, summary="Replace a record's text")
def update_record(request, kind: Kind, id: int, payload: TextIn):
    record, nodes = services.update_text(agent=request.auth.agent, kind=kind, id=id, text=payload.text)
    return _stored(record, nodes)


@router.delete("/records/{kind}/{id}", response=with_errors({204: None}, 404), summary="Delete a record and its nodes")
def delete_record(request, kind: Kind, id: int):
    services.delete_record(agent=request.auth.agent, kind=kind, id=id)
    return Status(204, None)
