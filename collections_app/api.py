"""Collections in the JSON API: thin adapters over the services."""

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Router, Schema, Status

from .models import Collection
from .services import known_answers
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


@router.get("/", response=list[CollectionOut], summary="The calling agent's collections")
def list_collections(request):
    agent = request.auth.agent
    return [collection_out(c) for c in agent.collections.select_related("built").order_by("name")]


@router.get("/{name}", response=CollectionOut, summary="One collection and what built it")
def read_collection(request, name: str):
    return collection_out(get_collection(agent=request.auth.agent, name=name))


class SearchIn(Schema):
    question: str = Field(..., min_length=1, max_length=MAX_QUESTION_CHARS)
    reader: str | None = Field(None, max_length=200, description="Required when the collection answers per reader.")
    onBehalfOf: str | None = Field(None, max_length=100, description="The agent model calls are charged to.")
    most: int = Field(5, ge=1, le=MAX_MOST)
    around: int | None = Field(None, ge=0, le=MAX_AROUND, description="Paragraphs either side of a hit.")
    min_score: float | None = Field(None, ge=0, le=1, description="The floor; 0 turns it off.")


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
    rerank_score: float | None = Field(None, description="Only when reranked: the reranker's score, which set the order.")
    fused_rank: int | None = Field(None, description="Only when reranked: the position by the fused score.")


class RerankOut(Schema):
    status: Literal["reranked", "not configured", "unavailable", "over budget", "nothing to rerank"]
    model: str | None = None
    depth: int | None = Field(None, description="How many fused candidates the reranker reordered.")


class JudgeOut(Schema):
    status: Literal["answered", "not configured", "unavailable", "over budget", "nothing to judge"]
    model: str | None = None


class SearchOut(Schema):
    paragraphs: list[ParagraphOut]
    floor: float
    floor_source: Literal["default", "collection", "request", "measured"] = Field(
        ..., description="Where the floor came from: MIN_SCORE, the collection's override, this request, "
        "or measured off the collection's known answers."
    )
    around: int
    mode: Literal["hybrid", "vector", "lexical"]
    model: str
    refused: bool | None = Field(..., description="true: withheld by the judge; false: approved; null: not judged.")
    judge: JudgeOut | None = None
    rerank: RerankOut | None = None


@router.post("/{name}/search", response=SearchOut, summary="Search a collection")
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


@router.post("/{name}/build", response={202: BuildOut}, summary="Queue a build of a collection")
def build(request, name: str):
    run = request_build(collection=get_collection(agent=request.auth.agent, name=name), requested_by="api")
    run.refresh_from_db()
    return Status(202, {"build": run.pk, "status": run.status})


class KnownAnswersIn(Schema):
    questions: list[Any] = Field(
        ...,
        description='Up to 200 items: {"question", "answer": "text the answering paragraph holds"} or '
        '{"question", "control": true} for a question the documents do not answer. An empty list clears the set.',
    )
    floor_measured: bool | None = Field(
        None, description="true: the collection's floor is read off its known answers; false: it is not; "
        "absent: unchanged."
    )


class KnownAnswerResult(Schema):
    question: str
    control: bool
    answer: str | None = None
    found: bool | None = Field(None, description="Found in the top 5 at the floor in force.")
    rank: int | None = None
    score: float | None = Field(None, description="The answering paragraph's score, unfloored.")
    top_score: float | None = Field(None, description="The best score returned, unfloored.")
    returned: int | None = Field(None, description="A control: paragraphs it gets back at the floor in force.")


class KnownAnswersReportOut(Schema):
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
    # In the collection's known-answers answer; a build's status carries the report without them.
    results: list[KnownAnswerResult] | None = None


class KnownAnswersOut(Schema):
    collection: str
    questions: list[dict[str, Any]]
    floor_measured: bool
    report: KnownAnswersReportOut | None = Field(..., description="The latest build's measurement; null: none yet.")


@router.get("/{name}/known-answers", response=KnownAnswersOut, summary="A collection's known answers and how its latest build did")
def read_known_answers(request, name: str):
    return known_answers.describe(get_collection(agent=request.auth.agent, name=name))


@router.put("/{name}/known-answers", response=KnownAnswersOut, summary="Replace a collection's known answers")
def put_known_answers(request, name: str, payload: KnownAnswersIn):
    collection = get_collection(agent=request.auth.agent, name=name)
    known_answers.set_known_answers(collection=collection, items=payload.questions,
                                    floor_measured=payload.floor_measured, allow_per_reader=False)
    return known_answers.describe(collection)
