"""The API's error shape as an OpenAPI schema, so every route declares the errors it can answer."""

from ninja import Schema

ERROR_MEANINGS = {
    400: "The request is malformed, out of bounds, or of the wrong type.",
    401: "No valid API key: `Authorization: Bearer <key>`.",
    403: "Not allowed (a key charging an agent other than its own).",
    404: "No such object for this agent (another agent's answers the same).",
    409: "The current state forbids it (never built, a build already running, a model mismatch).",
    413: "The request body is larger than the server accepts.",
    429: "The agent's runaway limit (model calls per minute) was reached; see Retry-After.",
    503: "The embedder is unavailable.",
}


class ErrorDetail(Schema):
    code: str
    message: str


class ErrorOut(Schema):
    error: ErrorDetail


def errors(*statuses: int) -> dict:
    """`response={200: X, **errors(400, 401)}`: the error statuses a route answers, in the one shape."""
    unknown = set(statuses) - set(ERROR_MEANINGS)
    if unknown:
        raise ValueError(f"no meaning written for {sorted(unknown)}")
    return {status: ErrorOut for status in statuses}
