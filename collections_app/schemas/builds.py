"""A build: queued (`BuildOut`), and its status and outcome (`BuildStatusOut`)."""

from typing import Literal

from ninja import Field, Schema

from ragsite.schemas import StrictSchema

from ..services.builds.status import MAX_LISTED, MAX_WAIT_SECONDS
from .known_answers import BuildKnownAnswersOut


class BuildOut(Schema):
    build: int
    status: str


class BuildProgress(Schema):
    phase: Literal["queued", "reading documents", "embedding paragraphs", "saving", "finished"] = Field(
        ...,
        description="What the build is doing now; `paragraphs_done` moves batch by batch while embedding.",
    )
    documents_done: int
    documents_total: int
    paragraphs_done: int
    paragraphs_total: int


class BuildStatusOut(Schema):
    build: int
    collection: str
    status: Literal["queued", "running", "succeeded", "succeeded_with_review", "failed", "refused"]
    percent: int
    progress: BuildProgress
    passages: int
    documents_read: int
    documents_reused: int
    documents_relabelled: int = Field(
        ...,
        description="Of those reused, documents whose source gave them other readers: re-labelled, "
        "neither read nor embedded again (docs/sources.md).",
    )
    documents_refused: int
    documents_in_review: int = Field(
        ...,
        description="Documents this build left waiting for a person, wholly or for some paragraphs "
        "(status succeeded_with_review; the warnings name them).",
    )
    paragraphs_embedded: int
    refused: list[str] | None = Field(
        ..., description="null: not recorded yet; []: nothing refused; names otherwise."
    )
    warnings: list[str]
    problems: list[str]
    model: str | None
    previous_model: str | None
    error: str | None
    waiting: str | None = Field(
        ..., description="Set when a queued build waits for a task worker that is not running."
    )
    requested_by: str
    known_answers: BuildKnownAnswersOut | None = Field(
        ..., description="How this build did on the collection's known answers; null: none measured."
    )
    # Strings exactly as the service writes them, so the API and MCP answer byte for byte alike.
    created_at: str = Field(..., json_schema_extra={"format": "date-time"})
    started_at: str | None = Field(..., json_schema_extra={"format": "date-time"})
    finished_at: str | None = Field(..., json_schema_extra={"format": "date-time"})
    seconds: float | None


class BuildsQuery(Schema):
    limit: int = Field(10, ge=1, le=MAX_LISTED)


class BuildStatusIn(StrictSchema):
    """The MCP tool's choice of build (the API names it in the path) and how long to wait for it."""

    build: int | None = Field(
        None, ge=1, description="The build's id, as `build` answered; default: the collection's latest build."
    )
    wait_seconds: float = Field(
        0,
        ge=0,
        le=MAX_WAIT_SECONDS,
        description=f"Wait up to this many seconds (at most {MAX_WAIT_SECONDS}) for the build to finish "
        "before answering.",
    )
