"""The OpenAI-compatible vector stores (`/v1/vector_stores`), declared once: OpenAI's request and answer
shapes with ragsite's extensions.

`openai_api.py` validates the search body and the list's query against these models (a refusal names
the field at fault, with OpenAI's `param`), the OpenAPI document publishes them beside the JSON API's
routes (`config/api.py`), and tests check that real answers carry exactly the declared keys. They are
OpenAI's names, not ragsite's (`query`, `max_num_results`, `ranking_options.score_threshold`):
`openai_api.py` translates them into a search (`search_collection`).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ninja import Field
from pydantic import BaseModel

from ragsite.model_calls.rerank import RerankOut
from ragsite.schemas import StrictSchema

from ..limits import MAX_AROUND, MAX_MOST, MAX_QUESTION_CHARS
from .search import JudgeOut

DEFAULT_RESULTS = 10  # OpenAI's default for max_num_results
MAX_LISTED = 100
DEFAULT_LISTED = 20

QueryText = Annotated[str, Field(min_length=1, max_length=MAX_QUESTION_CHARS)]


# --- Requests ---


class HybridSearchIn(StrictSchema):
    """OpenAI's fusion weights; ragsite accepts only its own proportion (any multiple of it)."""

    embedding_weight: float | None = Field(None, ge=0, strict=True, allow_inf_nan=False)
    text_weight: float | None = Field(None, ge=0, strict=True, allow_inf_nan=False)


class RankingOptionsIn(StrictSchema):
    ranker: Literal["auto", "default-2024-11-15"] | None = Field(
        None,
        description="Both mean ragsite's ranking; `none` is refused: fusion and the configured reranker "
        "cannot be switched off per request.",
    )
    score_threshold: float | None = Field(
        None, ge=0, le=1, strict=True, description="The floor (`min_score`); absent: the collection's."
    )
    hybrid_search: HybridSearchIn | None = None


class VectorStoreSearchIn(StrictSchema):
    """`POST /v1/vector_stores/{id}/search`: OpenAI's body, and ragsite's extensions (`reader`,
    `readerToken`, `onBehalfOf`, `around`), which may come as headers instead."""

    query: QueryText | Annotated[list[QueryText], Field(min_length=1, max_length=1)] = Field(
        ..., description="The question: a string, or a list holding one (ragsite searches one at a time)."
    )
    filters: Any = Field(
        None,
        json_schema_extra={"type": ["object", "null"]},
        description="OpenAI's attribute filter, the search's `filters` (docs/collections.md).",
    )
    max_num_results: int = Field(
        DEFAULT_RESULTS, ge=1, le=MAX_MOST, strict=True, description="`most`; OpenAI's default, 10."
    )
    ranking_options: RankingOptionsIn | None = None
    rewrite_query: Literal[False] | None = Field(
        None, description="`true` is refused: ragsite searches the query as given."
    )
    reader: str | None = Field(
        None, max_length=200, strict=True, description="Or the `Ragsite-Reader` header."
    )
    readerToken: str | None = Field(
        None, max_length=16384, strict=True, description="Or the `Ragsite-Reader-Token` header."
    )
    onBehalfOf: str | None = Field(
        None, max_length=100, strict=True, description="Or the `Ragsite-On-Behalf-Of` header."
    )
    around: int | None = Field(
        None, ge=0, le=MAX_AROUND, strict=True, description="Neighbours stitched; default the collection's."
    )


class VectorStoresQuery(StrictSchema):
    """`GET /v1/vector_stores`' query: at most `limit`, by creation time, after or before a store's id."""

    limit: int = Field(DEFAULT_LISTED, ge=1, le=MAX_LISTED)
    order: Literal["asc", "desc"] = "desc"
    after: str | None = Field(None, max_length=200)
    before: str | None = Field(None, max_length=200)


# --- Answers ---


class FileCountsOut(BaseModel):
    in_progress: int
    completed: int = Field(..., description="Documents searched.")
    failed: int = Field(..., description="Documents refused.")
    cancelled: int
    total: int = Field(..., description="Every document, in review or switched off too.")


class StoreMetadataOut(BaseModel):
    """OpenAI's metadata values are strings: each of these is "true" or "false"."""

    per_reader: Literal["true", "false"]
    counts_include_restricted: Literal["true", "false"]
    built: Literal["true", "false"]


class VectorStoreOut(BaseModel):
    """One collection as an OpenAI vector store; its id is the collection's name."""

    id: str
    object: Literal["vector_store"]
    name: str
    created_at: int | None
    last_active_at: int | None = Field(..., description="When the current build was made.")
    status: Literal["completed", "in_progress", "expired"]
    usage_bytes: int = Field(..., description="The size of the search index on disk.")
    file_counts: FileCountsOut
    metadata: StoreMetadataOut
    expires_after: None
    expires_at: None


class VectorStoresOut(BaseModel):
    """OpenAI's cursor page of vector stores."""

    object: Literal["list"]
    data: list[VectorStoreOut]
    first_id: str | None
    last_id: str | None
    has_more: bool


class TextContentOut(BaseModel):
    type: Literal["text"]
    text: str


class ResultExtensionOut(BaseModel):
    """What OpenAI's result has no field for, with the search answer's meanings."""

    chunk_id: str
    chunk_ids: list[str]
    passages: int
    first: int
    last: int
    pages: list[int] | None = None
    rerank_score: float | None = None
    fused_rank: int | None = None


class SearchResultOut(BaseModel):
    """One paragraph of the search, as OpenAI's search result."""

    file_id: str = Field(..., description="The document's name.")
    filename: str
    score: float = Field(..., description="The fused score in [0, 1] the floor applies to.")
    attributes: dict[str, str | int | float | bool] = Field(
        ...,
        description="The document's attributes, with document, section, chunk_id and (for a document "
        'with pages) pages as text, "8-11".',
    )
    content: list[TextContentOut]
    ragsite: ResultExtensionOut


class PageExtensionOut(BaseModel):
    """What OpenAI's page has no field for, with the search answer's meanings."""

    floor: float
    floor_source: Literal["default", "collection", "request", "measured"]
    refused: bool | None
    around: int
    mode: Literal["hybrid", "vector", "lexical"]
    model: str
    judge: JudgeOut | None = None
    rerank: RerankOut | None = None


class SearchResultsOut(BaseModel):
    """OpenAI's `vector_store.search_results.page`: one result per paragraph of the search, in order."""

    object: Literal["vector_store.search_results.page"]
    search_query: list[str]
    data: list[SearchResultOut]
    has_more: Literal[False]
    next_page: None
    ragsite: PageExtensionOut


class OpenAIErrorDetail(BaseModel):
    code: str
    message: str
    type: Literal["invalid_request_error", "requests", "server_error"] = Field(
        ..., description="OpenAI's kind of error, from the status: a 4xx, a 429, a 5xx."
    )
    param: str | None = Field(
        ..., description="The request field at fault (`ranking_options.ranker`), or null."
    )


class OpenAIErrorOut(BaseModel):
    """The one error shape with OpenAI's `type` and `param` beside `code` and `message`."""

    error: OpenAIErrorDetail
