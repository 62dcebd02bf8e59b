"""Collections in the JSON API: thin adapters over the services."""

from datetime import datetime
from typing import Any, Literal

from ninja import Field, Query, Router, Schema, Status
from pydantic import ConfigDict

from ragsite.schemas import StrictSchema, with_errors

from .limits import DEFAULT_MOST, MAX_ANSWER_CHARS, MAX_AROUND, MAX_MOST, MAX_QUESTION_CHARS, MIN_ANSWER_CHARS
from .models import Collection
from .services import agents, build_status, builds, citations, known_answers, search, sync
from .services.search.answer import SearchOut
from .services.sync import MAX_EVERY, MIN_EVERY

router = Router(tags=["collections"])


class BuildRecord(Schema):
    model: str
    dimensions: int
    method: str
    built_from: str
    passages: int
    built_at: datetime
    refused: list[str] | None  # null: nobody recorded; []: nothing refused; names otherwise


class SyncOut(Schema):
    sync_every: int = Field(..., description="Minutes between checks of the collection's folder.")
    last_checked_at: datetime | None
    last_changed_at: datetime | None = Field(..., description="When a check last found the folder changed.")
    next_check_at: datetime | None
    outcome: str = Field(
        ..., description='What the last check found: "unchanged", "1 new, 2 changed: build 7 queued", …'
    )
    build: int | None = Field(..., description="The last build a check queued.")
    changed_since_build: bool = Field(
        ..., description="A check saw the folder change after the live build was made; a build follows."
    )


class CollectionOut(Schema):
    name: str
    built_from: str
    method: str
    per_reader: bool
    judge: bool
    folder: str = Field(
        ..., description="The sub-folder of the agent's folder under KNOWLEDGE_ROOT; empty: none."
    )
    built: BuildRecord | None  # null: never built
    sync: SyncOut | None = Field(..., description="null: the collection is built only when asked.")


def collection_out(collection: Collection) -> dict:
    built = getattr(collection, "built", None)
    return {
        "sync": sync.describe(collection),
        "name": collection.name,
        "built_from": collection.built_from,
        "method": collection.method,
        "per_reader": collection.per_reader,
        "judge": collection.judge,
        "folder": collection.folder,
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


@router.get("", response=with_errors({200: list[CollectionOut]}), summary="The calling agent's collections")
def list_collections(request):
    agent = request.auth.agent
    return [collection_out(c) for c in agent.collections.select_related("built").order_by("name")]


# The same list with a trailing slash: both spellings work, one is documented.
router.get("/", response=list[CollectionOut], include_in_schema=False)(list_collections)


class CollectionIn(StrictSchema):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {"name": "policies", "folder": "policies", "built_from": "the HR share"}
        }
    )

    name: str = Field(..., min_length=1, max_length=100, description="Letters, digits, '-' or '_'.")
    folder: str = Field(
        "", max_length=100, description="A sub-folder of KNOWLEDGE_ROOT/<agent id>/, by name only."
    )
    built_from: str = Field(
        "", max_length=200, description='What the documents are, for people: "the HR share".'
    )
    method: str = Field("structure", max_length=40, description="The chunking method.")
    per_reader: bool = False
    sync_every: int | None = Field(
        None,
        ge=MIN_EVERY,
        le=MAX_EVERY,
        strict=True,
        description="Check the folder every N minutes and build when it changed; null: build only when "
        "asked. Left out: a collection with a folder checks it every SYNC_EVERY minutes (5 by default).",
    )


@router.post("", response=with_errors({201: CollectionOut}, 409), summary="Create a collection")
def create_collection(request, payload: CollectionIn):
    collection = agents.create_collection(
        agent=request.auth.agent,
        name=payload.name,
        folder=payload.folder,
        built_from=payload.built_from,
        method=payload.method,
        per_reader=payload.per_reader,
        # Left out is not null: a folder is followed unless the agent says otherwise.
        sync_every=payload.sync_every if "sync_every" in payload.model_fields_set else "default",
    )
    return Status(201, collection_out(collection))


router.post("/", response={201: CollectionOut}, include_in_schema=False)(create_collection)


@router.get(
    "/{name}", response=with_errors({200: CollectionOut}, 404), summary="One collection and what built it"
)
def read_collection(request, name: str):
    return collection_out(agents.get_collection(agent=request.auth.agent, name=name))


class SyncIn(StrictSchema):
    sync_every: int | None = Field(
        ...,
        ge=MIN_EVERY,
        le=MAX_EVERY,
        strict=True,
        description="Minutes between checks of the folder; null stops syncing.",
    )


@router.put(
    "/{name}/sync",
    response=with_errors({200: CollectionOut}, 404),
    summary="Keep a collection current by itself, or stop",
)
def put_sync(request, name: str, payload: SyncIn):
    """The first check runs within a minute; each check builds only when the folder changed."""
    collection = agents.get_collection(agent=request.auth.agent, name=name)
    sync.set_sync(collection=collection, every=payload.sync_every)
    return collection_out(collection)


class SearchIn(StrictSchema):
    # The API docs' "Try it out" body: a generated one ("reader": "string", "onBehalfOf": "string",
    # "min_score": 1) answered 403 and would have found nothing; this one works with any agent's key.
    model_config = ConfigDict(
        json_schema_extra={"example": {"question": "How many days of leave carry over?", "most": 5}}
    )

    question: str = Field(..., min_length=1, max_length=MAX_QUESTION_CHARS)
    reader: str | None = Field(
        None, max_length=200, description="Required when the collection answers per reader."
    )
    onBehalfOf: str | None = Field(None, max_length=100, description="The agent model calls are charged to.")
    # Strict: `"5"`, `2.0` and `true` are not numbers an agent meant (the review's D20).
    most: int = Field(DEFAULT_MOST, ge=1, le=MAX_MOST, strict=True)
    around: int | None = Field(
        None, ge=0, le=MAX_AROUND, strict=True, description="Paragraphs either side of a hit."
    )
    min_score: float | None = Field(None, ge=0, le=1, strict=True, description="The floor; 0 turns it off.")
    max_chars: int | None = Field(
        None,
        ge=MIN_ANSWER_CHARS,
        le=MAX_ANSWER_CHARS,
        strict=True,
        description="Characters of text the answer may hold; default ANSWER_MAX_CHARS.",
    )
    # Any, checked by the search service: a malformed filter is `invalid_filters` here as on /v1 and MCP.
    filters: Any = Field(
        None,
        json_schema_extra={"type": "object"},
        description="Only paragraphs matching this filter take part, before ranking: OpenAI's vector-store "
        'shape, {"type": "eq"|"ne"|"gt"|"gte"|"lt"|"lte"|"in"|"nin", "key", "value"} or {"type": "and"|"or", '
        '"filters": [...]}, over document attributes and document, section, page (docs/collections.md).',
    )


@router.post(
    "/{name}/search",
    response=with_errors({200: SearchOut}, 403, 404, 409, 413, 429, 503),
    summary="Search a collection",
)
def search_collection(request, name: str, payload: SearchIn):
    return search.search_collection(
        agent=request.auth.agent,
        collection=name,
        question=payload.question,
        reader=payload.reader,
        on_behalf_of=payload.onBehalfOf,
        most=payload.most,
        around=payload.around,
        min_score=payload.min_score,
        max_chars=payload.max_chars,
        key=request.auth,
        filters=payload.filters,
    )


class CitedIn(Schema):
    chunk_id: str = Field(
        ..., min_length=1, max_length=400, description="<document>#<k>, as a search answer cites it."
    )
    reader: str | None = Field(
        None, max_length=200, description="Required when the collection answers per reader."
    )


class CitedOut(Schema):
    chunk_id: str
    document: str
    section: str
    text: str = Field(..., description="The paragraph as a search for the same reader shows it.")


@router.get(
    "/{name}/paragraph",
    response=with_errors({200: CitedOut}, 404, 409),
    summary="Read one cited paragraph by its chunk id",
)
def read_paragraph(request, name: str, params: Query[CitedIn]):
    """A per-reader collection's ids count that reader's paragraphs; one the reader may not read and one
    that does not exist answer the same 404."""
    return citations.read_cited(
        agent=request.auth.agent, collection=name, chunk_id=params.chunk_id, reader=params.reader
    )


class BuildOut(Schema):
    build: int
    status: str


@router.post(
    "/{name}/build", response=with_errors({202: BuildOut}, 404, 409), summary="Queue a build of a collection"
)
def build_collection(request, name: str):
    """Queue a build; read its outcome at `/collections/{name}/builds/{build}`."""
    run = builds.request_build(
        collection=agents.get_collection(agent=request.auth.agent, name=name), requested_by="api"
    )
    run.refresh_from_db()
    return Status(202, {"build": run.pk, "status": run.status})


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


@router.get(
    "/{name}/known-answers",
    response=with_errors({200: KnownAnswersOut}, 404),
    summary="A collection's known answers and how its latest build did",
)
def read_known_answers(request, name: str):
    return known_answers.describe(agents.get_collection(agent=request.auth.agent, name=name))


@router.put(
    "/{name}/known-answers",
    response=with_errors({200: KnownAnswersOut}, 403, 404, 409, 413),
    summary="Replace a collection's known answers",
)
def put_known_answers(request, name: str, payload: KnownAnswersIn):
    collection = agents.get_collection(agent=request.auth.agent, name=name)
    known_answers.set_known_answers(
        collection=collection,
        items=payload.questions,
        floor_measured=payload.floor_measured,
        allow_per_reader=False,
    )
    return known_answers.describe(collection)


class BuildKnownAnswersOut(KnownAnswersSummaryOut):
    measured_at: str = Field(..., json_schema_extra={"format": "date-time"})


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
    status: Literal["queued", "running", "succeeded", "failed", "refused"]
    percent: int
    progress: BuildProgress
    passages: int
    documents_read: int
    documents_reused: int
    documents_refused: int
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


@router.get(
    "/{name}/builds/{build}",
    response=with_errors({200: BuildStatusOut}, 404),
    summary="One build's status and outcome",
)
def read_build(request, name: str, build: int):
    collection = agents.get_collection(agent=request.auth.agent, name=name)
    return build_status.build_status(run=build_status.get_build(collection=collection, build_id=build))


class BuildsQuery(Schema):
    limit: int = Field(10, ge=1, le=build_status.MAX_LISTED)


@router.get(
    "/{name}/builds",
    response=with_errors({200: list[BuildStatusOut]}, 404),
    summary="A collection's latest builds, newest first",
)
def list_builds(request, name: str, params: Query[BuildsQuery]):
    collection = agents.get_collection(agent=request.auth.agent, name=name)
    return [
        build_status.build_status(run=run)
        for run in build_status.recent_builds(collection=collection, limit=params.limit)
    ]
