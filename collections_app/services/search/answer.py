"""The search answer, declared once. The API's response schema is these models; the MCP tool's output
schema is generated from them (`mcp_output_schema`); a test checks that `search_collection`'s answers
are what they declare. Adding a field to the answer is a field here, set where the answer is built.
"""

from __future__ import annotations

import copy
from typing import Literal

from pydantic import BaseModel, Field


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
        None,
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


class RerankOut(BaseModel):
    """Whether the reranker ordered the paragraphs; unless "reranked", the fused order stands."""

    status: Literal["reranked", "not configured", "unavailable", "over budget", "nothing to rerank"]
    model: str | None = None
    depth: int | None = Field(None, description="How many fused candidates the reranker reordered.")


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
        description="true: the budget left out paragraphs or neighbours the search found, "
        "or cut one at a sentence boundary; ask again with a larger max_chars for more.",
    )
    mode: Literal["hybrid", "vector", "lexical"]
    model: str
    refused: bool | None = Field(
        ..., description="true: withheld by the judge; false: approved; null: not judged."
    )
    judge: JudgeOut | None = None
    rerank: RerankOut | None = None


def mcp_output_schema(model: type[BaseModel] = SearchOut) -> dict:
    """``model``'s JSON Schema as an MCP tool publishes it: self-contained (every ``$ref`` replaced by
    its definition, so the schema can be nested, as `ragsite.mcp.registry.or_error` nests it) and
    without pydantic's generated titles."""
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})

    def inline(node, names_fields: bool = False):
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(copy.deepcopy(definitions[node["$ref"].rsplit("/", 1)[-1]]))
            # Under "properties" the keys are field names (a field may be called "title").
            return {
                key: inline(value, key == "properties")
                for key, value in node.items()
                if names_fields or key != "title"
            }
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    return inline(schema)


def quoted(answer: dict) -> tuple[list[str], int]:
    """What a search answer quotes, for the read audit: every stitched chunk id, and the characters
    of text."""
    paragraphs = answer["paragraphs"]
    return [cid for p in paragraphs for cid in p["chunk_ids"]], sum(len(p["text"]) for p in paragraphs)
