"""OpenAI-compatible vector stores over an agent's collections: thin views over the requests and
answers declared in `schemas/vector_stores.py`.

`GET /v1/vector_stores`, `GET /v1/vector_stores/{id}` and `POST /v1/vector_stores/{id}/search`, with
the agent keys of the JSON API as bearer tokens, so the official `openai` SDK (`client.vector_stores`)
searches a collection. A vector store's id is the collection's name. The search is
`services.search.search_collection` with the request translated: `query` → question,
`max_num_results` → most (default 10, OpenAI's), `ranking_options.score_threshold` → the floor;
`reader`, `onBehalfOf` and `around` are ragsite's extension fields (in the body, or as the
`Ragsite-Reader` / `Ragsite-On-Behalf-Of` headers). What the search cannot honour is refused by
name rather than ignored: weights other than the fusion's own, `rewrite_query: true`, several
queries, the `none` ranker. Errors are OpenAI's error object, the project's `{"error": {"code",
"message"}}` with OpenAI's `type` and `param` beside them; the SDK shows `message`. Routes OpenAI has
and ragsite does not serve (create, update, delete, files) answer 404, as OpenAI answers a URL it
lacks. docs/api.md has the whole contract.
"""

from __future__ import annotations

from functools import wraps
from typing import Any, TypeVar

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from pydantic import BaseModel, ValidationError

from ragsite import audit, fusion
from ragsite.bodies import json_object_of
from ragsite.errors import RagsiteError, error_body
from ragsite.schemas import bounds, field_path, plain_view_paths

from .limits import MAX_QUESTION_CHARS
from .schemas.search import quoted
from .schemas.vector_stores import (
    HybridSearchIn,
    OpenAIErrorOut,
    SearchResultsOut,
    VectorStoreOut,
    VectorStoreSearchIn,
    VectorStoresOut,
    VectorStoresQuery,
)
from .services.agents import key_from_request
from .services.readers.tokens import READER_TOKEN_HEADER, reader_named
from .services.search import search_collection
from .services.vector_stores import document_attributes, get_vector_store, list_vector_stores, results_page

Declared = TypeVar("Declared", bound=BaseModel)
MAX_BODY_BYTES = 1024 * 1024
READER_HEADER, ON_BEHALF_OF_HEADER = "Ragsite-Reader", "Ragsite-On-Behalf-Of"
# Weights whose embedding share differs from the fusion's by less than this are the fusion's own.
WEIGHT_TOLERANCE = 1e-6


class BadRequest(RagsiteError):
    code = "invalid_request"


class Refused(RagsiteError):
    """A field the declaration refuses, with OpenAI's `param`: the field at fault."""

    def __init__(self, message: str, *, code: str, param: str | None) -> None:
        super().__init__(message, code=code)
        self.param = param


def _answer(body: Any, status: int = 200) -> JsonResponse:
    return JsonResponse(body, status=status, safe=False, json_dumps_params={"ensure_ascii": False})


# OpenAI's error object is {"message", "type", "param", "code"}: `type` from the status as OpenAI's own
# API sends it, `param` the request field at fault when the code names one (null otherwise).
PARAMS = {
    "invalid_query": "query",
    "invalid_max_num_results": "max_num_results",
    "invalid_around": "around",
    "invalid_filters": "filters",
    "invalid_score_threshold": "ranking_options.score_threshold",
    "unsupported_ranker": "ranking_options.ranker",
    "invalid_hybrid_search": "ranking_options.hybrid_search",
    "unsupported_hybrid_search": "ranking_options.hybrid_search",
    "rewrite_unsupported": "rewrite_query",
    "reader_required": "reader",
    "invalid_limit": "limit",
    "invalid_order": "order",
}
# The code of a refusal by the declaration (`schemas.vector_stores`), by the field at fault; any other
# field's (an extension's, `before`, an unknown one) is `invalid_request`.
FIELD_CODES = {
    "query": "invalid_query",
    "max_num_results": "invalid_max_num_results",
    "around": "invalid_around",
    "ranking_options.score_threshold": "invalid_score_threshold",
    "ranking_options.ranker": "unsupported_ranker",
    "ranking_options.hybrid_search": "invalid_hybrid_search",
    "rewrite_query": "rewrite_unsupported",
    "limit": "invalid_limit",
    "order": "invalid_order",
}
# Where pydantic's words would not say why a value is refused.
WHY = {
    "query": f"query must be a string of 1 to {MAX_QUESTION_CHARS} characters, or a list holding one: "
    "ragsite searches one query at a time",
    "ranking_options.ranker": "ranker must be auto or default-2024-11-15: ragsite's ranking (fusion, and the "
    "reranker when one is configured) cannot be switched off per request",
    "rewrite_query": "rewrite_query is not supported: ragsite searches the query as given; send false or "
    "leave it out",
}


def error_type(status: int) -> str:
    if status >= 500:
        return "server_error"
    if status == 429:
        return "requests"
    return "invalid_request_error"


def openai_error(code: str, message: str, status: int, *, param: str | None = None) -> JsonResponse:
    """The project's error shape with OpenAI's `type` and `param` beside `code` and `message`."""
    body = error_body(code, message)
    body["error"].update(type=error_type(status), param=param or PARAMS.get(code))
    return _answer(body, status)


@csrf_exempt  # bearer keys, no cookies
def not_found(request, rest: str = ""):
    """A /v1/vector_stores route ragsite does not serve: 404 as OpenAI answers a URL it does not have."""
    return openai_error(
        "not_found",
        f"ragsite does not serve {request.method} {request.path[:200]}: its vector stores are its "
        "collections, listed, read and searched here and created, changed or deleted in the admin or "
        "with /api/v1/collections",
        404,
    )


def _view(method: str):
    """Bearer auth, the allowed method, and OpenAI's error object around a view taking (request, key, ...)."""

    def decorate(view):
        @wraps(view)
        @csrf_exempt  # bearer keys, no cookies: nothing for a cross-site request to ride on
        def wrapped(request, *args, **kwargs):
            if request.method != method:
                # Create, update and delete: OpenAI's own API answers a route it lacks with 404, and an
                # SDK caller catches NotFoundError for it; 405 would be a bare APIStatusError.
                return not_found(request)
            key = key_from_request(request)
            if key is None:
                response = openai_error(
                    "unauthorized", "a valid API key is required: Authorization: Bearer <key>", 401
                )
                response["WWW-Authenticate"] = "Bearer"
                return response
            try:
                return _answer(view(request, key, *args, **kwargs))
            except RagsiteError as exc:
                response = openai_error(exc.code, exc.message, exc.status, param=getattr(exc, "param", None))
                for name, value in exc.headers.items():
                    response[name] = value
                return response

        return wrapped

    return decorate


@_view("GET")
def vector_stores(request, key) -> dict:
    listing = declared(VectorStoresQuery, dict(request.GET.items()), "query parameter")
    return list_vector_stores(agent=key.agent, request=listing)


@_view("GET")
def vector_store_detail(request, key, store_id: str) -> dict:
    return get_vector_store(agent=key.agent, store_id=store_id)


@_view("POST")
def vector_store_search(request, key, store_id: str) -> dict:
    # OpenAI's clients send null for a field left out; it means the default, as an absent field does.
    body = {name: value for name, value in _body(request).items() if value is not None}
    asked = declared(VectorStoreSearchIn, body, "field")
    query = asked.query if isinstance(asked.query, str) else asked.query[0]
    if not query.strip():
        raise RagsiteError(WHY["query"], code="invalid_query")
    options = asked.ranking_options
    _check_weights(options.hybrid_search if options is not None else None)
    reader = reader_named(
        reader=_extension(asked, request, "reader", READER_HEADER),
        token=_extension(asked, request, "readerToken", READER_TOKEN_HEADER),
    )
    on_behalf_of = _extension(asked, request, "onBehalfOf", ON_BEHALF_OF_HEADER)
    with audit.reading(
        kind=audit.VECTOR_STORE_SEARCH,
        channel=audit.OPENAI,
        key=key,
        target=store_id,
        question=query,
        reader=reader,
        on_behalf_of=on_behalf_of,
    ) as read:
        answer = search_collection(
            agent=key.agent,
            collection=store_id,
            question=query,
            reader=reader,
            on_behalf_of=on_behalf_of,
            most=asked.max_num_results,
            around=asked.around,
            min_score=options.score_threshold if options is not None else None,
            key=key,
            filters=asked.filters,
        )
        read.answered(*quoted(answer))
    names = {paragraph["document"] for paragraph in answer["paragraphs"]}
    return results_page(
        answer, query=query, attributes=document_attributes(agent=key.agent, store_id=store_id, names=names)
    )


def _body(request) -> dict:
    return json_object_of(request, MAX_BODY_BYTES)


def declared(model: type[Declared], values: dict, what: str) -> Declared:
    """``values`` read by their declaration, or the refusal of the first field at fault: its code
    (`FIELD_CODES`) and OpenAI's `param` (the field's dotted path); an undeclared field is refused by
    name, with the fields this takes."""
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        errors = exc.errors()
    unknown = [str(error["loc"][-1]) for error in errors if error["type"] == "extra_forbidden"]
    if unknown:
        raise BadRequest(
            f"unknown {what}(s) {', '.join(repr(name[:40]) for name in unknown[:5])}; this takes "
            f"{', '.join(model.model_fields)}"
        )
    error = errors[0]
    path = field_path(model, error["loc"])
    # The field itself, or the nearest enclosing one with a code (a weight: its `hybrid_search`).
    coded = [at for at in FIELD_CODES if path == at or path.startswith(at + ".")]
    if coded:
        at = max(coded, key=len)
        raise Refused(WHY.get(at, f"{path}: {error['msg']}"), code=FIELD_CODES[at], param=at)
    raise Refused(f"{path}: {error['msg']}", code="invalid_request", param=None)


def _check_weights(hybrid: HybridSearchIn | None) -> None:
    """Weights are honoured only when they are the fusion's: its scale is the one the floor is set on."""
    if hybrid is None:
        return
    embedding = fusion.FUSION_WEIGHT if hybrid.embedding_weight is None else hybrid.embedding_weight
    text = 1 - fusion.FUSION_WEIGHT if hybrid.text_weight is None else hybrid.text_weight
    if embedding + text <= 0:
        raise RagsiteError(
            "embedding_weight and text_weight are numbers of at least 0, not both 0",
            code="invalid_hybrid_search",
        )
    if abs(embedding / (embedding + text) - fusion.FUSION_WEIGHT) > WEIGHT_TOLERANCE:
        raise RagsiteError(
            f"ragsite fuses at embedding_weight {fusion.FUSION_WEIGHT} and text_weight "
            f"{round(1 - fusion.FUSION_WEIGHT, 6)} (any multiple of those), the scale its floors are "
            "measured on; other weights are not supported",
            code="unsupported_hybrid_search",
        )


def _extension(asked: VectorStoreSearchIn, request, field: str, header: str) -> str | None:
    """A ragsite extension given in the body or as a header; both, differing, is refused. A header
    is held to the field's declared length, as the body is."""
    in_body, in_header = getattr(asked, field), request.headers.get(header)
    if in_body is not None and in_header is not None and in_body != in_header:
        raise BadRequest(f"{field} and the {header} header disagree; send one")
    _, longest = bounds(VectorStoreSearchIn, field)
    if in_header is not None and len(in_header) > longest:
        raise BadRequest(f"the {header} header is at most {longest} characters")
    return in_body if in_body is not None else in_header


# --- The routes in the OpenAPI document -----------------------------------------------------------

# Each route: (path, method, the view, summary, its query or body model, its answer, the error statuses it
# answers).
ROUTES = (
    (
        "/v1/vector_stores",
        "get",
        vector_stores,
        "List your vector stores",
        VectorStoresQuery,
        VectorStoresOut,
        (400, 401, 404),
    ),
    (
        "/v1/vector_stores/{store_id}",
        "get",
        vector_store_detail,
        "One vector store",
        None,
        VectorStoreOut,
        (401, 404),
    ),
    (
        "/v1/vector_stores/{store_id}/search",
        "post",
        vector_store_search,
        "Search a vector store: the collection's search in OpenAI's shapes",
        VectorStoreSearchIn,
        SearchResultsOut,
        (400, 401, 403, 404, 409, 413, 429, 503),
    ),
)


def openapi_routes() -> tuple[dict, list[type[BaseModel]]]:
    """The vector-store routes as OpenAPI paths, and the models they name (`config/api.py`)."""
    return plain_view_paths(ROUTES, tag="vector stores (OpenAI)", error_model=OpenAIErrorOut)
