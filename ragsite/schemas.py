"""What every request and error body of the JSON API has in common.

The error shape as an OpenAPI schema, so every route declares the errors it can answer. Request
bodies are strict: a field the endpoint does not take is refused with 422 naming it (as the MCP
tools refuse an unknown argument), rather than silently ignored, so a misspelt `min_scor` never
quietly searches with the default floor.
"""

from ninja import Schema
from pydantic import ConfigDict

ERROR_MEANINGS = {
    400: "The request is malformed, out of bounds, or of the wrong type.",
    401: "No valid API key: `Authorization: Bearer <key>`.",
    403: "Not allowed (a key charging an agent other than its own).",
    404: "No such object for this agent (another agent's answers the same).",
    409: "The current state forbids it (never built, a build already running, a model mismatch).",
    413: "The request body is larger than the server accepts.",
    422: "The body has fields this route does not take; the message names them.",
    429: "The agent's runaway limit (model calls per minute) was reached; see Retry-After.",
    503: "The embedder is unavailable, the store is busy with another write (code `store_busy`; "
    "see Retry-After), or this server is still loading the collection's search index (code "
    "`index_loading`; see Retry-After).",
}


class StrictSchema(Schema):
    """A request body that refuses fields it does not declare."""

    model_config = ConfigDict(extra="forbid")


class ErrorDetail(Schema):
    code: str
    message: str


class ErrorOut(Schema):
    """The one error shape: `{"error": {"code", "message"}}`."""

    error: ErrorDetail


def errors(*statuses: int) -> dict:
    """`response={200: X, **errors(400, 401)}`: the error statuses a route answers, in the one shape."""
    unknown = set(statuses) - set(ERROR_MEANINGS)
    if unknown:
        raise ValueError(f"no meaning written for {sorted(unknown)}")
    return {status: ErrorOut for status in statuses}


# Every authenticated operation with a body may answer these; each route adds its own. 503: a store busy
# with another writer's lock (SQLite) answers it on any route that writes.
COMMON_ERRORS = (400, 401, 422, 503)


def with_errors(responses: dict, *statuses: int) -> dict:
    """`responses` plus the error statuses an operation may answer, for the OpenAPI schema."""
    return {**responses, **errors(*COMMON_ERRORS, *statuses)}
