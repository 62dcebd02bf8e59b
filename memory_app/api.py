"""Memory in the JSON API (mounted at /api/v1/memory): thin adapters over `memory_app.services`.

The calling agent is the API key's agent; another agent's record answers 404 like a missing one.
Every request and answer is declared in `memory_app.schemas`.
"""

from functools import wraps

from django.http import JsonResponse
from ninja import Query, Router, Status

from ragsite import audit
from ragsite.errors import RagsiteError
from ragsite.schemas import with_errors

from . import services
from .schemas import (
    ChangedOut,
    HealthOut,
    HealthQuery,
    Kind,
    ListOut,
    ListQuery,
    NodeOut,
    RecallIn,
    RecallOut,
    RecordChangeIn,
    RecordIn,
    RecordOut,
    StoredOut,
    TextIn,
    change_arguments,
    recall_arguments,
    store_arguments,
)
from .services.reading import RECALLED, listing_quoted, recall_quoted, record_quoted

router = Router(tags=["memory"])


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
def store_memory(request, payload: RecordIn):
    record, nodes = services.store_memory(agent=request.auth.agent, **store_arguments(payload))
    return Status(201, _stored(record, nodes))


@router.post(
    "/episodes",
    response=with_errors({201: StoredOut}, 413, 429, 503),
    exclude_none=True,
    summary="Archive an episode",
)
def archive_episode(request, payload: RecordIn):
    record, nodes = services.archive_episode(agent=request.auth.agent, **store_arguments(payload))
    return Status(201, _stored(record, nodes))


@router.post(
    "/recall",
    response=with_errors({200: RecallOut}, 413, 429, 503),
    # What the service answers, as declared: a detail a status lacks (the reranker's model) is left
    # out, not sent as null.
    exclude_unset=True,
    summary="Recall the excerpts of your records that best answer a question, within a character budget",
)
def recall_records(request, payload: RecallIn):
    with audit.reading(
        kind=audit.RECALL, channel=audit.API, key=request.auth, target=RECALLED, question=payload.question
    ) as read:
        answer = services.recall(agent=request.auth.agent, **recall_arguments(payload))
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
    response=with_errors({200: HealthOut}),
    exclude_unset=True,  # the fields that do not apply (a repair's, the whole store's) are left out
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


@router.patch(
    "/records/{kind}/{id}",
    response=with_errors({200: ChangedOut}, 404, 409),
    summary="Change a record's tags and validity (only the fields sent; null clears one)",
)
def change_record(request, kind: Kind, id: int, payload: RecordChangeIn):
    record = services.change_record(agent=request.auth.agent, kind=kind, id=id, **change_arguments(payload))
    return services.changed_answer(record)


@router.delete(
    "/records/{kind}/{id}", response=with_errors({204: None}, 404), summary="Delete a record and its nodes"
)
def delete_record(request, kind: Kind, id: int):
    services.delete_record(agent=request.auth.agent, kind=kind, id=id)
    return Status(204, None)
