"""OpenAI-compatible vector stores over an agent's collections: thin views, the OpenAI request shape
read here.

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

from typing import Any

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from ragsite import audit, fusion
from ragsite.bodies import BadBody, bounded_number, parse_json
from ragsite.errors import RagsiteError, error_body

from .limits import MAX_AROUND, MAX_MOST, MAX_QUESTION_CHARS
from .schemas.search import quoted
from .services.agents import key_from_request
from .services.reader_tokens import READER_TOKEN_HEADER, reader_named
from .services.search import search_collection
from .services.vector_stores import (
    DEFAULT_LISTED,
    ListRequest,
    document_attributes,
    get_vector_store,
    list_vector_stores,
    results_page,
)

MAX_BODY_BYTES = 1024 * 1024
DEFAULT_RESULTS = 10  # OpenAI's default for max_num_results
SEARCH_FIELDS = (
    "query",
    "filters",
    "max_num_results",
    "ranking_options",
    "rewrite_query",
    "reader",
    "readerToken",
    "onBehalfOf",
    "around",
)
RANKING_FIELDS = ("ranker", "score_threshold", "hybrid_search")
RANKERS = ("auto", "default-2024-11-15")
READER_HEADER, ON_BEHALF_OF_HEADER = "Ragsite-Reader", "Ragsite-On-Behalf-Of"
EXTENSION_CHARS = {"reader": 200, "readerToken": 16384, "onBehalfOf": 100}
# Weights whose embedding share differs from the fusion's by less than this are the fusion's own.
WEIGHT_TOLERANCE = 1e-6


class BadRequest(RagsiteError):
    code = "invalid_request"


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
                response = openai_error(exc.code, exc.message, exc.status)
                for name, value in exc.headers.items():
                    response[name] = value
                return response

        return wrapped

    return decorate


@_view("GET")
def vector_stores(request, key) -> dict:
    query = request.GET
    unknown = sorted(set(query) - {"limit", "order", "after", "before"})
    if unknown:
        raise BadRequest(f"unknown query parameter(s) {', '.join(repr(u[:40]) for u in unknown[:5])}")
    limit = query.get("limit", str(DEFAULT_LISTED))
    if not limit.isdigit():
        raise RagsiteError("limit must be a whole number", code="invalid_limit")
    return list_vector_stores(
        agent=key.agent,
        request=ListRequest(
            limit=int(limit),
            order=query.get("order", "desc"),
            after=query.get("after"),
            before=query.get("before"),
        ),
    )


@_view("GET")
def vector_store_detail(request, key, store_id: str) -> dict:
    return get_vector_store(agent=key.agent, store_id=store_id)


@_view("POST")
def vector_store_search(request, key, store_id: str) -> dict:
    body = _body(request)
    query = _query(body.get("query"))
    options = _ranking_options(body.get("ranking_options"))
    if body.get("rewrite_query") not in (None, False):
        raise RagsiteError(
            "rewrite_query is not supported: ragsite searches the query as given; send false or leave it out",
            code="rewrite_unsupported",
        )
    reader = reader_named(
        reader=_extension(body, request, "reader", READER_HEADER),
        token=_extension(body, request, "readerToken", READER_TOKEN_HEADER),
    )
    on_behalf_of = _extension(body, request, "onBehalfOf", ON_BEHALF_OF_HEADER)
    most = _integer(body, "max_num_results", DEFAULT_RESULTS, 1, MAX_MOST)
    around = _integer(body, "around", None, 0, MAX_AROUND)
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
            most=most,
            around=around,
            min_score=options.get("score_threshold"),
            key=key,
            filters=body.get("filters"),
        )
        read.answered(*quoted(answer))
    names = {paragraph["document"] for paragraph in answer["paragraphs"]}
    return results_page(
        answer, query=query, attributes=document_attributes(agent=key.agent, store_id=store_id, names=names)
    )


def _body(request) -> dict:
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    raw = b"" if declared > MAX_BODY_BYTES else request.read(MAX_BODY_BYTES + 1)
    if declared > MAX_BODY_BYTES or len(raw) > MAX_BODY_BYTES:
        raise RagsiteError(f"a request body is at most {MAX_BODY_BYTES} bytes", code="too_large", status=413)
    try:
        body = parse_json(raw or b"null")
    except BadBody as exc:  # the JSON API's code for the same body
        raise RagsiteError(exc.message, code=exc.code) from None
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    unknown = sorted(set(body) - set(SEARCH_FIELDS))
    if unknown:
        raise BadRequest(
            f"unknown field(s) {', '.join(repr(u[:40]) for u in unknown[:5])}; a search takes "
            f"{', '.join(SEARCH_FIELDS)}"
        )
    return body


def _query(value: Any) -> str:
    if isinstance(value, list):
        if len(value) != 1:
            raise RagsiteError(
                "ragsite searches one query at a time: send a string (or a list of one)", code="invalid_query"
            )
        value = value[0]
    if not isinstance(value, str) or not value.strip():
        raise RagsiteError("query must be a non-empty string", code="invalid_query")
    if len(value) > MAX_QUESTION_CHARS:
        raise RagsiteError(f"query is at most {MAX_QUESTION_CHARS} characters", code="invalid_query")
    return value


def _integer(body: dict, name: str, default: int | None, low: int, high: int) -> int | None:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise RagsiteError(f"{name} must be a whole number from {low} to {high}", code=f"invalid_{name}")
    return value


def _ranking_options(value: Any) -> dict:
    """`ranking_options` checked: the ranker ragsite has, a threshold in [0, 1], the fusion's own weights."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadRequest("ranking_options must be an object")
    unknown = sorted(set(value) - set(RANKING_FIELDS))
    if unknown:
        raise BadRequest(f"unknown ranking option(s) {', '.join(repr(u[:40]) for u in unknown[:5])}")
    ranker = value.get("ranker")
    if ranker is not None and ranker not in RANKERS:
        raise RagsiteError(
            f"ranker must be one of {', '.join(RANKERS)}: ragsite's ranking (fusion, and the "
            "reranker when one is configured) cannot be switched off per request",
            code="unsupported_ranker",
        )
    threshold = value.get("score_threshold")
    if threshold is not None and not (bounded_number(threshold) and 0 <= threshold <= 1):
        raise RagsiteError("score_threshold must be a number from 0 to 1", code="invalid_score_threshold")
    _check_weights(value.get("hybrid_search"))
    return {"score_threshold": None if threshold is None else float(threshold)}


def _check_weights(hybrid: Any) -> None:
    """Weights are honoured only when they are the fusion's: its scale is the one the floor is set on."""
    if hybrid is None:
        return
    if not isinstance(hybrid, dict) or set(hybrid) - {"embedding_weight", "text_weight"}:
        raise BadRequest("hybrid_search is {embedding_weight, text_weight}")
    embedding, text = (
        hybrid.get("embedding_weight", fusion.FUSION_WEIGHT),
        hybrid.get("text_weight", 1 - fusion.FUSION_WEIGHT),
    )
    if not (
        bounded_number(embedding)
        and bounded_number(text)
        and embedding >= 0
        and text >= 0
        and embedding + text > 0
    ):
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


def _extension(body: dict, request, field: str, header: str) -> str | None:
    """A ragsite extension given in the body or as a header; both, differing, is refused."""
    in_body, in_header = body.get(field), request.headers.get(header)
    if in_body is not None and not isinstance(in_body, str):
        raise BadRequest(f"{field} must be a string")
    if in_body is not None and in_header is not None and in_body != in_header:
        raise BadRequest(f"{field} and the {header} header disagree; send one")
    value = in_body if in_body is not None else in_header
    most = EXTENSION_CHARS.get(field, 100)
    if value is not None and len(value) > most:
        raise BadRequest(f"{field} is at most {most} characters")
    return value
