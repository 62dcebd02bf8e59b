"""Measuring a collection (the MCP `measure` tool): every chunking variant against known answers."""

from typing import Any

from ninja import Field, Schema
from pydantic import ConfigDict

from ragsite.schemas import StrictSchema

from ..limits import MAX_MOST, MAX_QUESTION_CHARS
from ..services.measure import DEFAULT_MOST
from ..services.questions import MAX_MARKER_CHARS, MAX_QUESTIONS


class MeasureQuestion(StrictSchema):
    # `answer` and `control` may be left out but are never null: hence a default of None on a type
    # that refuses None (pydantic does not validate defaults).
    question: str = Field(..., min_length=1, max_length=MAX_QUESTION_CHARS)
    answer: str = Field(
        None,
        min_length=1,
        max_length=MAX_MARKER_CHARS,
        description="Text the answering paragraph contains (compared case-insensitively).",
    )
    control: bool = Field(None, description="true: the documents do not answer this question.")


class MeasureIn(StrictSchema):
    questions: list[MeasureQuestion] = Field(
        ...,
        min_length=1,
        max_length=MAX_QUESTIONS,
        description=f"1 to {MAX_QUESTIONS} items, each "
        f'{{"question": 1-{MAX_QUESTION_CHARS} characters, "answer": "text the answering paragraph '
        'contains"} or {"question": ..., "control": true} for a question the documents do not answer.',
    )
    most: int = Field(
        DEFAULT_MOST, ge=1, le=MAX_MOST, description="Paragraphs returned per question and variant."
    )
    min_score: float | None = Field(
        None,
        ge=0,
        le=1,
        description="A floor; by default none, so every returned paragraph carries its score.",
    )


class FloorRange(Schema):
    lowest_answer: float | None
    highest_control: float | None
    separates: bool | None


class MeasuredCorpus(Schema):
    collection: str
    documents: int
    digest: str
    refused: list[str]


class MeasuredVariant(Schema):
    """One variant's row; its chunking's own details (size, overlap, …) come as the variant has them."""

    model_config = ConfigDict(extra="allow")

    method: str
    size: int | None
    overlap: int
    around: int
    paragraphs: int
    found: int
    questions: list[dict[str, Any]]
    controls: list[dict[str, Any]]
    floor_range: FloorRange
    current: bool = Field(..., description="The collection's own method, size and overlap.")


class MeasureOut(Schema):
    collection: str
    agent: str
    measured_at: str = Field(..., json_schema_extra={"format": "date-time"})
    model: str
    dimensions: int
    mode: str
    corpus: MeasuredCorpus
    settings: dict[str, Any]
    questions: int
    controls: int
    embedded: int = Field(..., description="Texts embedded for this measurement.")
    variants: list[MeasuredVariant]
    skipped: list[dict[str, Any]]
