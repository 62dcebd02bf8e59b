"""Dify's External Knowledge API over an agent's collections: `POST /api/v1/retrieval`.

A Dify app registers `https://<ragsite>/api/v1` as an external knowledge API with an agent key, and a
collection's name as its "External Knowledge ID"; Dify then posts `{knowledge_id, query,
retrieval_setting: {top_k, score_threshold}, metadata_condition?}` to `<endpoint>/retrieval` with the
key as a bearer token and reads `{"records": [{content, score, title, metadata}]}` back. The search is
`services.search.search_collection`, the one ranking every other interface takes, with the request
translated: `top_k` → most (at most MAX_MOST, fewer records is within Dify's contract), a positive
`score_threshold` → the floor (Dify sends 0.0 when its threshold is off: the collection's own floor
then holds), `metadata_condition` → the search's filters over document attributes. The reader comes
from the `Ragsite-Reader` or `Ragsite-Reader-Token` header (Dify's form has no field for it; a proxy in
front of Dify adds it), the payer from `Ragsite-On-Behalf-Of`; the answer budget (ANSWER_MAX_CHARS)
applies as to every search.

Errors carry Dify's `error_code` and `error_msg` (1001: the Authorization header is not `Bearer <key>`;
1002: no such key; 2001: no such knowledge), beside the project's own `{"error": {"code", "message"}}`,
so a Dify user and a ragsite log read the same refusal. docs/api.md has the contract.
"""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from pydantic import BaseModel, ValidationError

from ragsite import audit
from ragsite.bodies import json_object_of
from ragsite.errors import RagsiteError, error_body
from ragsite.schemas import field_path, plain_view_paths

from .limits import MAX_MOST, MAX_QUESTION_CHARS
from .schemas.dify import (
    OPERATORS,
    DifyErrorOut,
    DifyRecordsOut,
    DifyRetrievalIn,
    MetadataConditionIn,
    RetrievalSettingIn,
)
from .schemas.search import quoted
from .services.agents import request_key
from .services.readers.tokens import reader_named
from .services.search import search_collection
from .services.vector_stores import document_attributes

MAX_BODY_BYTES = 1024 * 1024
READER_HEADER, READER_TOKEN_HEADER = "Ragsite-Reader", "Ragsite-Reader-Token"
ON_BEHALF_OF_HEADER = "Ragsite-On-Behalf-Of"
HEADER_CHARS = {READER_HEADER: 200, READER_TOKEN_HEADER: 16384, ON_BEHALF_OF_HEADER: 100}
# Dify's suggested error codes (its External Knowledge API page, "Error Handling").
INVALID_AUTHORIZATION, AUTHORIZATION_FAILED, KNOWLEDGE_MISSING = 1001, 1002, 2001
# Where pydantic's words would not say what to send.
WHY = {
    "query": f"query must be a non-empty string of at most {MAX_QUESTION_CHARS} characters",
    "retrieval_setting.top_k": "retrieval_setting.top_k must be a whole number of at least 1",
    "retrieval_setting.score_threshold": "retrieval_setting.score_threshold must be a number from 0 to 1",
    "metadata_condition.logical_operator": "metadata_condition.logical_operator must be and or or",
}


class BadRequest(RagsiteError):
    code = "invalid_request"


def dify_error(status: int, code: str, message: str, *, error_code: int | None = None) -> JsonResponse:
    body = error_body(code, message)
    if error_code is not None:
        body["error_code"] = error_code
    body["error_msg"] = message
    return JsonResponse(body, status=status, json_dumps_params={"ensure_ascii": False})


@csrf_exempt  # bearer keys, no cookies: nothing for a cross-site request to ride on
def retrieval(request):
    if request.method != "POST":
        return dify_error(405, "method_not_allowed", "retrieval takes POST")
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return dify_error(
            403,
            "unauthorized",
            "Invalid Authorization header format. Expected 'Bearer <api-key>' format.",
            error_code=INVALID_AUTHORIZATION,
        )
    key = request_key(request, token.strip())
    if key is None:
        return dify_error(
            403, "unauthorized", "Authorization failed: no such API key", error_code=AUTHORIZATION_FAILED
        )
    try:
        return JsonResponse(_retrieve(request, key), json_dumps_params={"ensure_ascii": False})
    except RagsiteError as exc:
        if exc.code == "unknown_collection":
            return dify_error(
                404,
                exc.code,
                "The knowledge does not exist: no such collection",
                error_code=KNOWLEDGE_MISSING,
            )
        response = dify_error(exc.status, exc.code, exc.message)
        for name, value in exc.headers.items():
            response[name] = value
        return response


def _retrieve(request, key) -> dict:
    asked = _asked(json_object_of(request, MAX_BODY_BYTES))
    knowledge_id, query = asked.knowledge_id, asked.query
    if not knowledge_id.strip():
        raise BadRequest("knowledge_id must name a collection")
    if not query.strip():
        raise BadRequest(WHY["query"])
    most, floor = retrieval_setting(asked.retrieval_setting)
    filters = metadata_filters(asked.metadata_condition)
    reader = reader_named(reader=_header(request, READER_HEADER), token=_header(request, READER_TOKEN_HEADER))
    on_behalf_of = _header(request, ON_BEHALF_OF_HEADER)
    with audit.reading(
        kind=audit.SEARCH,
        channel=audit.DIFY,
        key=key,
        target=knowledge_id,
        question=query,
        reader=reader,
        on_behalf_of=on_behalf_of,
    ) as read:
        answer = search_collection(
            agent=key.agent,
            collection=knowledge_id,
            question=query,
            reader=reader,
            on_behalf_of=on_behalf_of,
            most=most,
            min_score=floor,
            key=key,
            filters=filters,
        )
        read.answered(*quoted(answer))
    names = {paragraph["document"] for paragraph in answer["paragraphs"]}
    attributes = document_attributes(agent=key.agent, store_id=knowledge_id, names=names)
    return {"records": records(answer, attributes)}


def records(answer: dict, attributes: dict[str, dict]) -> list[dict]:
    """The answer's paragraphs as Dify's records, best first. `metadata` is always an object (Dify's
    pipeline fails on null): the document's attributes with the paragraph's citation beside them."""
    return [
        {
            "content": paragraph["text"],
            "score": paragraph["score"],
            "title": paragraph["document"],
            "metadata": {
                **attributes.get(paragraph["document"], {}),
                "document": paragraph["document"],
                "section": paragraph["section"],
                "chunk_id": paragraph["chunk_id"],
                "pages": paragraph["pages"],
            },
        }
        for paragraph in answer["paragraphs"]
    ]


def retrieval_setting(setting: RetrievalSettingIn) -> tuple[int, float | None]:
    """(most, floor) from Dify's `retrieval_setting`."""
    # 0.0 is Dify's "threshold off": the collection's own floor answers, not no floor at all.
    threshold = setting.score_threshold
    return min(setting.top_k, MAX_MOST), float(threshold) if threshold > 0 else None


def metadata_filters(condition: MetadataConditionIn | None) -> dict | None:
    """Dify's `metadata_condition` as the search's filters (OpenAI's vector-store shape, index/filters.py).

    `name` may be a string or, as Dify's older page shows it, a list of names: any of them matching
    is a match. An operator the filters cannot express exactly is refused, never dropped."""
    if condition is None:
        return None
    filters = [_condition(item, i) for i, item in enumerate(condition.conditions)]
    return filters[0] if len(filters) == 1 else {"type": condition.logical_operator, "filters": filters}


def _condition(item, position: int) -> dict:
    operator = item.comparison_operator
    if operator not in OPERATORS:
        raise RagsiteError(
            f"metadata_condition.conditions[{position}].comparison_operator {operator!r} is not "
            f"supported; ragsite filters with {', '.join(OPERATORS)}",
            code="unsupported_operator",
        )
    names = [item.name] if isinstance(item.name, str) else item.name
    value = item.value
    if OPERATORS[operator] in ("in", "nin") and isinstance(value, str):
        value = [part.strip() for part in value.split(",")]  # Dify's form sends a list as one string
    comparisons = [{"type": OPERATORS[operator], "key": name, "value": value} for name in names]
    return comparisons[0] if len(comparisons) == 1 else {"type": "or", "filters": comparisons}


def _asked(body: dict) -> DifyRetrievalIn:
    """The body read by its declaration (`schemas.dify`), or a 400 naming the first field at fault; an
    undeclared field is refused by name, with where it was."""
    try:
        return DifyRetrievalIn.model_validate(body)
    except ValidationError as exc:
        errors = exc.errors()
    unknown = [error for error in errors if error["type"] == "extra_forbidden"]
    if unknown:
        where = field_path(DifyRetrievalIn, unknown[0]["loc"][:-1], positions=True)
        names = ", ".join(repr(str(error["loc"][-1])[:40]) for error in unknown[:5])
        raise BadRequest(f"unknown field(s) {names}" + (f" in {where}" if where else ""))
    error = errors[0]
    path = field_path(DifyRetrievalIn, error["loc"])
    where = field_path(DifyRetrievalIn, error["loc"], positions=True)
    raise BadRequest(WHY.get(path) or f"{where}: {error['msg']}")


def _header(request, name: str) -> str | None:
    value = request.headers.get(name)
    if value is not None and len(value) > HEADER_CHARS[name]:
        raise BadRequest(f"the {name} header is at most {HEADER_CHARS[name]} characters")
    return value


# Dify's route, published in the JSON API's OpenAPI document from its declarations (`schemas.dify`).
ROUTES = (
    (
        "/api/v1/retrieval",
        "post",
        retrieval,
        "Dify's External Knowledge API: a collection's search in Dify's shapes",
        DifyRetrievalIn,
        DifyRecordsOut,
        (400, 403, 404, 409, 413, 429, 503),
    ),
)


def openapi_routes() -> tuple[dict, list[type[BaseModel]]]:
    """Dify's route as OpenAPI paths, and the models it names (`config/api.py`)."""
    return plain_view_paths(
        ROUTES,
        tag="Dify external knowledge",
        error_model=DifyErrorOut,
        meanings={403: "No valid API key (Dify's error_code 1001 or 1002), or a payer not allowed."},
    )
