"""A search, declared once: the request (`SearchIn`) and the answer (`SearchOut`).

The API validates and publishes these models; the MCP tool's input and output schemas are generated
from them (`ragsite.schemas.tool_input`, `json_schema_of`); the service checks the request's limits
read from `SearchIn` (`services/search/plan.py`); tests check that `search_collection`'s answers carry
exactly what `SearchOut` declares. Adding a field is a field here, set where the answer is built.
"""

from __future__ import annotations

from typing import Any, Literal

from ninja import Field
from pydantic import BaseModel, ConfigDict

from ragsite.model_calls.rerank import RerankOut
from ragsite.schemas import StrictSchema, arguments_of

from ..limits import (
    DEFAULT_MOST,
    MAX_ANSWER_CHARS,
    MAX_AROUND,
    MAX_MOST,
    MAX_QUESTION_CHARS,
    MIN_ANSWER_CHARS,
)


class SearchIn(StrictSchema):
    """A question to one collection (the collection is named by the route, or the tool's `collection`)."""

    # The API docs' "Try it out" body: a generated one ("reader": "string", "onBehalfOf": "string",
    # "min_score": 1) answered 403 and would have found nothing; this one works with any agent's key.
    model_config = ConfigDict(
        json_schema_extra={"example": {"question": "How many days of leave carry over?", "most": 5}}
    )

    question: str = Field(
        ..., min_length=1, max_length=MAX_QUESTION_CHARS, description="What you want to know, in words."
    )
    reader: str | None = Field(
        None,
        max_length=200,
        description="The person you are reading for; required when the collection answers per reader.",
    )
    readerToken: str | None = Field(
        None,
        max_length=16384,
        description="Instead of reader: that person's ID token from the organisation's identity provider, "
        "verified; its groups give the labels (docs/operations.md).",
    )
    onBehalfOf: str | None = Field(
        None,
        max_length=100,
        description="The agent this search's model calls (embedding, reranking, judging) are charged to.",
    )
    # Strict: `"5"`, `2.0` and `true` are not numbers an agent meant.
    most: int = Field(
        DEFAULT_MOST, ge=1, le=MAX_MOST, strict=True, description="At most this many paragraphs."
    )
    around: int | None = Field(
        None,
        ge=0,
        le=MAX_AROUND,
        strict=True,
        description="Paragraphs either side of each hit to stitch in; default: the collection's.",
    )
    min_score: float | None = Field(
        None,
        ge=0,
        le=1,
        strict=True,
        description="The floor: nothing scoring below it comes back; 0 turns it off; default: the "
        "collection's.",
    )
    max_chars: int | None = Field(
        None,
        ge=MIN_ANSWER_CHARS,
        le=MAX_ANSWER_CHARS,
        strict=True,
        description="Characters of text the answer may hold; default ANSWER_MAX_CHARS.",
    )
    # Any, checked by the search service: a malformed filter is `invalid_filters` here as on /v1.
    filters: Any = Field(
        None,
        json_schema_extra={"type": ["object", "null"]},
        description="Only paragraphs matching this filter take part, before ranking: OpenAI's vector-store "
        'shape, {"type": "eq"|"ne"|"gt"|"gte"|"lt"|"lte"|"in"|"nin", "key", "value"} or {"type": "and"|"or", '
        '"filters": [...]}, over document attributes and document, section, page (docs/collections.md).',
    )


# The request's fields the adapters resolve before searching: the reader, named or by its ID token
# (`services.readers.tokens.reader_named`); every other field reaches the service as it was sent.
RESOLVED_BY_ADAPTER = ("reader", "readerToken")


def search_arguments(request: SearchIn | dict) -> dict:
    """`search_collection`'s keyword arguments for a search request (the API's validated body or the
    MCP tool's arguments): each declared field but the reader, `onBehalfOf` as `on_behalf_of`."""
    return arguments_of(
        SearchIn, request, renamed={"onBehalfOf": "on_behalf_of"}, left_out=RESOLVED_BY_ADAPTER
    )


class ShortenedOut(BaseModel):
    """A stored paragraph of this one that the answer budget shortened, and the part of it kept."""

    chunk_id: str
    start: int = Field(..., description="Where the kept part begins, in characters into the paragraph text.")
    end: int = Field(..., description="Where it ends (exclusive); the text before and after was left out.")


class ParagraphOut(BaseModel):
    """One paragraph of the answer, best first."""

    text: str
    score: float = Field(..., description="The fused score in [0, 1]; the floor applies to it.")
    document: str
    section: str
    passages: int = Field(..., description="How many stored paragraphs this one stitches together.")
    chunk_id: str = Field(
        ...,
        description="<document>#<k> of the paragraph the question matched, k its position within its "
        "document from 0: the chunk_id export_index writes in docs.jsonl, for citation.",
    )
    chunk_ids: list[str] = Field(
        ..., description="The chunk ids of every stored paragraph stitched here, in order."
    )
    first: int = Field(
        ...,
        description="Position of the first stitched paragraph among those this search may "
        "read (1 = the first); not an id: it shifts when an earlier document changes.",
    )
    last: int = Field(..., description="Position of the last stitched paragraph, counted the same way.")
    pages: list[int] | None = Field(
        ...,
        description="[first, last] page of the text in its document (PDF page; slides and sheets "
        "where their readers number them), to open it at when checking the citation; null for a document "
        'without pages. The same as the "pages" docs.jsonl gives a chunk.',
    )
    rerank_score: float | None = Field(
        None,
        description="Only when reranked: the reranker's score, which set the order; `score` stays the "
        "fused score the floor applies to.",
    )
    fused_rank: int | None = Field(None, description="Only when reranked: the position by the fused score.")
    excerpts: list[ShortenedOut] = Field(
        ...,
        description="The stitched paragraphs the answer budget shortened (a hit to its best part, the last "
        "neighbour at a sentence), each with the part kept; empty when every one is whole.",
    )


class JudgeOut(BaseModel):
    """Whether the judge gave a verdict on the paragraphs."""

    status: Literal["answered", "not configured", "unavailable", "over budget", "nothing to judge"]
    model: str | None = None


class SearchOut(BaseModel):
    """A search's answer: the paragraphs at or above the floor, and how they were found."""

    paragraphs: list[ParagraphOut]
    floor: float
    floor_source: Literal["default", "collection", "request", "measured"] = Field(
        ...,
        description="Where the floor came from: MIN_SCORE, the collection's override, this request, "
        "or measured off the collection's known answers.",
    )
    around: int
    max_chars: int = Field(
        ...,
        description="The characters of text this answer could hold (the request's "
        "max_chars, or ANSWER_MAX_CHARS).",
    )
    chars: int = Field(..., description="The characters of text the paragraphs hold: at most max_chars.")
    cut: bool = Field(
        ...,
        description="true: the budget shortened a hit to its best part (see each paragraph's excerpts), "
        "left out neighbours or, past 300 characters a hit, the last hits; ask again with a larger "
        "max_chars for more.",
    )
    mode: Literal["hybrid", "vector", "lexical"]
    model: str
    refused: bool | None = Field(
        ..., description="true: withheld by the judge; false: approved; null: not judged."
    )
    judge: JudgeOut | None = Field(..., description="Whether the judge gave a verdict (null: not asked).")
    rerank: RerankOut | None = Field(..., description="Whether the reranker ordered the paragraphs.")


def quoted(answer: dict) -> tuple[list[str], int]:
    """What a search answer quotes, for the read audit: every stitched chunk id, and the characters
    of text."""
    paragraphs = answer["paragraphs"]
    return [cid for p in paragraphs for cid in p["chunk_ids"]], sum(len(p["text"]) for p in paragraphs)
