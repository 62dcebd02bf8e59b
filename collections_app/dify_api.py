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

from typing import Any

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt

from ragsite import audit
from ragsite.bodies import bounded_number, json_object_of
from ragsite.errors import RagsiteError, error_body

from .limits import MAX_MOST, MAX_QUESTION_CHARS
from .schemas.search import quoted
from .services.agents import request_key
from .services.readers.tokens import reader_named
from .services.search import search_collection
from .services.vector_stores import document_attributes

MAX_BODY_BYTES = 1024 * 1024
FIELDS = ("knowledge_id", "query", "retrieval_setting", "metadata_condition")
SETTING_FIELDS = ("top_k", "score_threshold")
READER_HEADER, READER_TOKEN_HEADER = "Ragsite-Reader", "Ragsite-Reader-Token"
ON_BEHALF_OF_HEADER = "Ragsite-On-Behalf-Of"
HEADER_CHARS = {READER_HEADER: 200, READER_TOKEN_HEADER: 16384, ON_BEHALF_OF_HEADER: 100}
# Dify's suggested error codes (its External Knowledge API page, "Error Handling").
INVALID_AUTHORIZATION, AUTHORIZATION_FAILED, KNOWLEDGE_MISSING = 1001, 1002, 2001
# Dify's comparison operators that the search's filters express exactly (index/filters.py); the others
# (contains, start with, empty, before, ...) are refused by name rather than ignored.
OPERATORS = {
    "is": "eq",
    "is not": "ne",
    "in": "in",
    "not in": "nin",
    "=": "eq",
    "≠": "ne",
    ">": "gt",
    "<": "lt",
    "≥": "gte",
    "≤": "lte",
}
MAX_CONDITIONS = 50


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
    body = _body(request)
    knowledge_id = body.get("knowledge_id")
    if not isinstance(knowledge_id, str) or not knowledge_id.strip():
        raise BadRequest("knowledge_id must be a non-empty string: the collection's name")
    query = body.get("query")
    if not isinstance(query, str) or not query.strip():
        raise BadRequest("query must be a non-empty string")
    if len(query) > MAX_QUESTION_CHARS:
        raise BadRequest(f"query is at most {MAX_QUESTION_CHARS} characters")
    most, floor = retrieval_setting(body.get("retrieval_setting"))
    filters = metadata_filters(body.get("metadata_condition"))
    reader = reader_named(reader=_header(request, READER_HEADER), token=_header(request, READER_TOKEN_HEADER))
    on_behalf_of = _header(request, ON_BEHALF_OF_HEADER)
    with audit.reading(
        kind=audit.SEARCH,
        channel=audit.DIFY,
        key=key,
        target=knowledge_id[:200],
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


def retrieval_setting(value: Any) -> tuple[int, float | None]:
    """(most, floor) from Dify's `retrieval_setting`; both fields are required by Dify's contract."""
    if not isinstance(value, dict):
        raise BadRequest("retrieval_setting must be an object {top_k, score_threshold}")
    unknown = sorted(set(value) - set(SETTING_FIELDS))
    if unknown:
        raise BadRequest(f"unknown retrieval_setting field(s) {', '.join(repr(u[:40]) for u in unknown[:5])}")
    top_k = value.get("top_k")
    if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
        raise BadRequest("retrieval_setting.top_k must be a whole number of at least 1")
    threshold = value.get("score_threshold")
    if (
        threshold is None
        or isinstance(threshold, bool)
        or not (bounded_number(threshold) and 0 <= threshold <= 1)
    ):
        raise BadRequest("retrieval_setting.score_threshold must be a number from 0 to 1")
    # 0.0 is Dify's "threshold off": the collection's own floor answers, not no floor at all.
    return min(top_k, MAX_MOST), float(threshold) if threshold > 0 else None


def metadata_filters(value: Any) -> dict | None:
    """Dify's `metadata_condition` as the search's filters (OpenAI's vector-store shape, index/filters.py).

    `name` may be a string or, as Dify's older page shows it, a list of names: any of them matching
    is a match. An operator the filters cannot express exactly is refused, never dropped."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"logical_operator", "conditions"}:
        raise BadRequest("metadata_condition must be an object {logical_operator, conditions}")
    logical = value.get("logical_operator", "and")
    if logical not in ("and", "or"):
        raise BadRequest("metadata_condition.logical_operator must be and or or")
    conditions = value.get("conditions")
    if not isinstance(conditions, list) or not conditions or len(conditions) > MAX_CONDITIONS:
        raise BadRequest(f"metadata_condition.conditions must be a list of 1 to {MAX_CONDITIONS} conditions")
    filters = [_condition(item, f"metadata_condition.conditions[{i}]") for i, item in enumerate(conditions)]
    return filters[0] if len(filters) == 1 else {"type": logical, "filters": filters}


def _condition(item: Any, where: str) -> dict:
    if not isinstance(item, dict) or set(item) - {"name", "comparison_operator", "value"}:
        raise BadRequest(f"{where} must be an object {{name, comparison_operator, value}}")
    operator = item.get("comparison_operator")
    if operator not in OPERATORS:
        raise RagsiteError(
            f"{where}.comparison_operator {str(operator)[:40]!r} is not supported; ragsite filters with "
            f"{', '.join(OPERATORS)}",
            code="unsupported_operator",
        )
    names = item.get("name")
    names = [names] if isinstance(names, str) else names
    if not isinstance(names, list) or not names or not all(isinstance(n, str) and n for n in names):
        raise BadRequest(f"{where}.name must be a metadata name or a list of them")
    value = item.get("value")
    if OPERATORS[operator] in ("in", "nin") and isinstance(value, str):
        value = [part.strip() for part in value.split(",")]  # Dify's form sends a list as one string
    comparisons = [{"type": OPERATORS[operator], "key": name, "value": value} for name in names]
    return comparisons[0] if len(comparisons) == 1 else {"type": "or", "filters": comparisons}


def _body(request) -> dict:
    body = json_object_of(request, MAX_BODY_BYTES)
    unknown = sorted(set(body) - set(FIELDS))
    if unknown:
        raise BadRequest(
            f"unknown field(s) {', '.join(repr(u[:40]) for u in unknown[:5])}; retrieval takes "
            f"{', '.join(FIELDS)}"
        )
    return body


def _header(request, name: str) -> str | None:
    value = request.headers.get(name)
    if value is not None and len(value) > HEADER_CHARS[name]:
        raise BadRequest(f"the {name} header is at most {HEADER_CHARS[name]} characters")
    return value
