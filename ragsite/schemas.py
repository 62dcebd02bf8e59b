"""What every request and error body of the JSON API has in common.

Request bodies are strict: a field the endpoint does not take is refused with 422
naming it (as the MCP tools refuse an unknown argument), rather than silently
ignored, so a misspelt `min_scor` never quietly searches with the default floor.
"""

from ninja import Schema
from pydantic import ConfigDict


class StrictSchema(Schema):
    """A request body that refuses fields it does not declare."""

    model_config = ConfigDict(extra="forbid")


class ErrorDetail(Schema):
    code: str
    message: str


class ErrorOut(Schema):
    """The one error shape: `{"error": {"code", "message"}}`."""

    error: ErrorDetail


# Every authenticated operation may answer these; each endpoint adds its own.
COMMON_ERRORS = (400, 401, 422)


def with_errors(responses: dict, *statuses: int) -> dict:
    """`responses` plus the error statuses an operation may answer, for the OpenAPI schema."""
    return {**responses, **{status: ErrorOut for status in (*COMMON_ERRORS, *statuses)}}
