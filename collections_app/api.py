"""Collections in the JSON API: thin adapters over the services."""

from datetime import datetime
from typing import Literal

from ninja import Field, Router, Schema, Status

from ragsite.schemas import errors

from .models import Collection
from .services.agents import get_collection
from .services.builds import request_build
from .services.search import MAX_AROUND, MAX_MOST, MAX_QUESTION_CHARS, search_collection

router = Router(tags=["collections"])


class BuildRecord(Schema):
    model: str
    dimensions: int
    method: str
    built_from: str
    passages: int
    built_at: datetime
    refused: list[str] | None  # null: nobody recorded; []: nothing refused; names otherwise


class CollectionOut(Schema):
    name: str
    built_from: str
    method: str
    per_reader: bool
    judge: bool
    built: BuildRecord | None  # null: never built


def collection_out(collection: Collection) -> dict:
    built = getattr(collection, "built", None)
    return {
        "name": collection.name,
        "built_from": collection.built_from,
        "method": collection.method,
        "per_reader": collection.per_reader,
        "judge": collection.judge,
        "built": None
        if built is None
        else {
            "model": built.model,
            "dimensions": built.dimensions,
            "method": built.method,
            "built_from": built.built_from,
            "passages": built.passages,
            "built_at": built.built_at,
            "refused": built.refused,
        },
    }


@router.get("/", response={200: list[CollectionOut], **errors(400, 401)}, summary="The calling agent's collections")
def list_collections(request):
    agent = request.auth.agent
    return [collection_out(c) for c in agent.collections.select_related("built").order_by("name")]


@router.get("/{name}", response={200: CollectionOut, **errors(400, 401, 404)}, summary="One collection and what built it")
def read_collection(request, name: str):
    return collection_out(get_collection(agent=request.auth.agent, name=name))


class SearchIn(Schema):
    question: str = Field(..., min_length=1, max_length=MAX_QUESTION_CHARS)
    reader: str | None = Field(None, max_length=200, description="Required when the collection answers per reader.")
    onBehalfOf: str | None = Field(None, max_length=100, description="The agent model calls are charged to.")
    # Strict: `"5"`, `2.0` and `true` are not numbers an agent meant (the review's D20).
    most: int = Field(5, ge=1, le=MAX_MOST, strict=True)
    around: int | None = Field(None, ge=0, le=MAX_AROUND, strict=True, description="Paragraphs either side of a hit.")
    min_score: float | None = Field(None, ge=0, le=1, strict=True, description="The floor; 0 turns it off.")


class ParagraphOut(Schema):
    text: str
    score: float
    document: str
    section: str
    passages: int = Field(..., description="How many stored paragraphs this one stitches together.")
    chunk_id: str = Field(
        ..., description="<document>#<k> of the paragraph the question matched, k its position within its "
        "document from 0: the chunk_id export_index writes in docs.jsonl, for citation."
    )
    chunk_ids: list[str] = Field(..., description="The chunk ids of every stored paragraph stitched here, in order.")
    first: int = Field(..., description="Position of the first stitched paragraph across the whole collection; "
                       "not an id: it shifts when an earlier document changes.")
    last: int = Field(..., description="Position of the last stitched paragraph across the whole collection.")


class JudgeOut(Schema):
    status: Literal["answered", "not configured", "unavailable", "over budget", "nothing to judge"]
    model: str | None = None


class SearchOut(Schema):
    paragraphs: list[ParagraphOut]
    floor: float
    around: int
    mode: Literal["hybrid", "vector", "lexical"]
    model: str
    refused: bool | None = Field(..., description="true: withheld by the judge; false: approved; null: not judged.")
    judge: JudgeOut | None = None


@router.post("/{name}/search", response={200: SearchOut, **errors(400, 401, 403, 404, 409, 413, 429, 503)}, summary="Search a collection")
def search(request, name: str, payload: SearchIn):
    return search_collection(
        agent=request.auth.agent,
        collection=name,
        question=payload.question,
        reader=payload.reader,
        on_behalf_of=payload.onBehalfOf,
        most=payload.most,
        around=payload.around,
        min_score=payload.min_score,
        key=request.auth,
    )


class BuildOut(Schema):
    build: int
    status: str


@router.post("/{name}/build", response={202: BuildOut, **errors(400, 401, 404, 409)}, summary="Queue a build of a collection")
def build(request, name: str):
    run = request_build(collection=get_collection(agent=request.auth.agent, name=name), requested_by="api")
    run.refresh_from_db()
    return Status(202, {"build": run.pk, "status": run.status})
