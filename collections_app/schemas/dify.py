"""Dify's External Knowledge API (`POST /api/v1/retrieval`), declared once: Dify's request and answer
shapes and its error body.

`dify_api.py` reads the request through `DifyRetrievalIn` (a refusal names the field at fault, in Dify's
`error_msg` and the project's `error.message`), the OpenAPI document publishes these models beside the
JSON API's routes (`config/api.py`), and tests check that real answers carry exactly the declared keys.
The names are Dify's (`knowledge_id`, `top_k`, `score_threshold`); `dify_api.py` translates them into a
search (`search_collection`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ninja import Field
from pydantic import BaseModel

from ragsite.schemas import ErrorDetail, StrictSchema

from ..limits import MAX_QUESTION_CHARS

MAX_CONDITIONS = 50
MAX_KNOWLEDGE_ID_CHARS = 200
# Dify's comparison operators and the search's filter (index/filters.py) each one is; an operator Dify
# has beyond these (contains, start with, empty, before, ...) is refused by name rather than ignored.
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

MetadataName = Annotated[str, Field(min_length=1, max_length=200)]


# --- Requests ---


class RetrievalSettingIn(StrictSchema):
    """Both fields are required, as in Dify's contract."""

    top_k: int = Field(
        ...,
        ge=1,
        strict=True,
        description="At most this many records (`most`); above 50 the answer holds at most 50.",
    )
    score_threshold: float = Field(
        ...,
        ge=0,
        le=1,
        strict=True,
        allow_inf_nan=False,
        description="The floor (`min_score`) when above 0; 0.0, Dify's threshold off, leaves the "
        "collection's own floor.",
    )


class ConditionIn(StrictSchema):
    name: MetadataName | Annotated[list[MetadataName], Field(min_length=1, max_length=MAX_CONDITIONS)] = (
        Field(..., description="A document attribute's name, or a list of them (any matching is a match).")
    )
    comparison_operator: str = Field(
        ..., max_length=40, description=f"One of {', '.join(OPERATORS)}; any other is refused by name."
    )
    value: Any = Field(
        None, description="The value compared; for `in`/`not in`, a list or one comma-separated string."
    )


class MetadataConditionIn(StrictSchema):
    logical_operator: Literal["and", "or"] = "and"
    conditions: list[ConditionIn] = Field(..., min_length=1, max_length=MAX_CONDITIONS)


class DifyRetrievalIn(StrictSchema):
    """Dify's retrieval request. The reader and the payer come as headers (`Ragsite-Reader`,
    `Ragsite-Reader-Token`, `Ragsite-On-Behalf-Of`): Dify's form has no field for them."""

    knowledge_id: str = Field(
        ..., min_length=1, max_length=MAX_KNOWLEDGE_ID_CHARS, description="The collection's name."
    )
    query: str = Field(..., min_length=1, max_length=MAX_QUESTION_CHARS)
    retrieval_setting: RetrievalSettingIn
    metadata_condition: MetadataConditionIn | None = Field(
        None, description="Filters over the documents' attributes, applied before ranking."
    )


# --- Answers ---


class DifyRecordOut(BaseModel):
    content: str
    score: float = Field(..., description="The hit's fused score, in [0, 1].")
    title: str = Field(..., description="The document's name.")
    metadata: dict[str, Any] = Field(
        ...,
        description="Always an object: the document's attributes with `document`, `section`, "
        "`chunk_id` and `pages` beside them.",
    )


class DifyRecordsOut(BaseModel):
    records: list[DifyRecordOut] = Field(..., description="Best first.")


class DifyErrorOut(BaseModel):
    """The one error shape with Dify's `error_code` (1001, 1002, 2001 where Dify names one) and
    `error_msg` (the message again) beside it."""

    error: ErrorDetail
    error_code: int | None = None
    error_msg: str
