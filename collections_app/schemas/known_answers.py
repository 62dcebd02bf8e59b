"""A collection's known answers: the set an agent keeps, and how a build did on them."""

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Schema

from ragsite.schemas import StrictSchema


class KnownAnswersIn(StrictSchema):
    questions: list[Any] = Field(
        ...,
        description='Up to 200 items: {"question", "answer": "text the answering paragraph holds"} or '
        '{"question", "control": true} for a question the documents do not answer. An empty list clears the '
        "set.",
    )
    floor_measured: bool | None = Field(
        None,
        description="true: the collection's floor is read off its known answers; false: it is not; "
        "absent: unchanged.",
    )


class KnownAnswerResult(Schema):
    question: str
    control: bool
    answer: str | None = None
    found: bool | None = Field(None, description="Found in the top 5 at the floor in force.")
    rank: int | None = None
    found_at_1: bool | None = Field(
        None, description="The answer asked for one paragraph holds the marker (a merged rank 1 may not)."
    )
    score: float | None = Field(None, description="The answering paragraph's score, unfloored.")
    top_score: float | None = Field(None, description="The best score returned, unfloored.")
    returned: int | None = Field(
        None, description="A control: paragraphs it gets back at the floor in force."
    )


class KnownAnswersSummaryOut(Schema):
    build: int
    status: Literal["measured", "failed"]
    measured_at: datetime
    answers: int
    controls: int
    found_at_1: int | None
    found_at_5: int | None
    floor: float | None = Field(..., description="The floor found@1 and found@5 were taken at.")
    floor_source: Literal["default", "collection", "measured"] | None
    lowest_answer: float | None
    highest_control: float | None
    separates: bool | None
    measured_floor: float | None
    lost: list[str] = Field(..., description="Questions the previous live build found and this one does not.")
    warnings: list[str]
    error: str | None


class KnownAnswersReportOut(KnownAnswersSummaryOut):
    # In the collection's known-answers answer; a build's status carries the report without them.
    results: list[KnownAnswerResult] | None = None


class KnownAnswersOut(Schema):
    collection: str
    questions: list[dict[str, Any]]
    floor_measured: bool
    report: KnownAnswersReportOut | None = Field(
        ..., description="The latest build's measurement; null: none yet."
    )


class BuildKnownAnswersOut(KnownAnswersSummaryOut):
    """The report as a build's status carries it: its time as the service writes it."""

    measured_at: str = Field(..., json_schema_extra={"format": "date-time"})
