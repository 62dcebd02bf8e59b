"""Collections in the JSON API: thin adapters over the services; every request and answer is
declared in `collections_app.schemas`."""

from ninja import Query, Router, Status

from ragsite import audit
from ragsite.schemas import with_errors

from .models import Collection
from .schemas.builds import BuildOut, BuildsQuery, BuildStatusOut
from .schemas.collections import (
    AnalyzerIn,
    AnalyzerOut,
    CitedIn,
    CitedOut,
    CollectionIn,
    CollectionOut,
    SourceIn,
    SyncIn,
)
from .schemas.known_answers import KnownAnswersIn, KnownAnswersOut
from .schemas.search import SearchIn, SearchOut, quoted, search_arguments
from .services import agents, analyzers, builds, citations, known_answers, origins, search, sync
from .services.builds import status as build_status
from .services.readers import tokens as reader_tokens

router = Router(tags=["collections"])


def collection_out(collection: Collection) -> dict:
    built = getattr(collection, "built", None)
    return {
        "sync": sync.describe(collection),
        "source": origins.describe(collection),
        "name": collection.name,
        "built_from": collection.built_from,
        "method": collection.method,
        "analyzer": collection.analyzer,
        "per_reader": collection.per_reader,
        "judge": collection.judge,
        "folder": collection.folder,
        "built": None
        if built is None
        else {
            "model": built.model,
            "dimensions": built.dimensions,
            "method": built.method,
            "analyzer": built.analyzer,
            "built_from": built.built_from,
            "passages": built.passages,
            "counts_include_restricted": collection.per_reader,
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


@router.post("", response=with_errors({201: CollectionOut}, 409), summary="Create a collection")
def create_collection(request, payload: CollectionIn):
    collection = agents.create_collection(
        agent=request.auth.agent,
        name=payload.name,
        folder=payload.folder,
        built_from=payload.built_from,
        method=payload.method,
        analyzer=payload.analyzer,
        per_reader=payload.per_reader,
        # Left out is not null: a folder is followed unless the agent says otherwise.
        sync_every=payload.sync_every if "sync_every" in payload.model_fields_set else "default",
        source=payload.source.model_dump() if payload.source is not None else None,
    )
    return Status(201, collection_out(collection))


router.post("/", response={201: CollectionOut}, include_in_schema=False)(create_collection)


@router.get(
    "/{name}", response=with_errors({200: CollectionOut}, 404), summary="One collection and what built it"
)
def read_collection(request, name: str):
    return collection_out(agents.get_collection(agent=request.auth.agent, name=name))


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


@router.put(
    "/{name}/analyzer",
    response=with_errors({200: AnalyzerOut}, 404),
    summary="Read the collection's words another way (queues a rebuild)",
)
def put_analyzer(request, name: str, payload: AnalyzerIn):
    """Searches keep the live build's analyzer until the rebuild this queues is live."""
    collection = agents.get_collection(agent=request.auth.agent, name=name)
    _changed, run, why = analyzers.set_analyzer(
        collection=collection, analyzer=payload.analyzer, requested_by="api"
    )
    return {**collection_out(collection), "rebuild": None if run is None else run.pk, "rebuild_note": why}


@router.put(
    "/{name}/source",
    response=with_errors({200: CollectionOut}, 404),
    summary="Read a collection from a folder, a git repository or an S3 bucket",
)
def put_source(request, name: str, payload: SourceIn):
    """The next build or sync check reads the new source; what is built keeps answering until then."""
    collection = agents.get_collection(agent=request.auth.agent, name=name)
    origins.set_source(
        collection=collection, kind=payload.kind, settings=payload.settings, credentials=payload.credentials
    )
    return collection_out(collection)


@router.post(
    "/{name}/search",
    response=with_errors({200: SearchOut}, 401, 403, 404, 409, 413, 429, 503),
    summary="Search a collection",
)
def search_collection(request, name: str, payload: SearchIn):
    reader = reader_tokens.reader_named(reader=payload.reader, token=payload.readerToken)
    with audit.reading(
        kind=audit.SEARCH,
        channel=audit.API,
        key=request.auth,
        target=name,
        question=payload.question,
        reader=reader,
        on_behalf_of=payload.onBehalfOf,
    ) as read:
        answer = search.search_collection(
            agent=request.auth.agent,
            collection=name,
            reader=reader,
            key=request.auth,
            **search_arguments(payload),
        )
        read.answered(*quoted(answer))
    return answer


@router.get(
    "/{name}/paragraph",
    response=with_errors({200: CitedOut}, 401, 404, 409, 503),
    summary="Read one cited paragraph by its chunk id",
)
def read_paragraph(request, name: str, params: Query[CitedIn]):
    """A per-reader collection's ids count that reader's paragraphs; one the reader may not read and one
    that does not exist answer the same 404."""
    token = params.readerToken or request.headers.get(reader_tokens.READER_TOKEN_HEADER)
    reader = reader_tokens.reader_named(reader=params.reader, token=token)
    with audit.reading(
        kind=audit.PARAGRAPH, channel=audit.API, key=request.auth, target=name, reader=reader
    ) as read:
        shown = citations.read_cited(
            agent=request.auth.agent, collection=name, chunk_id=params.chunk_id, reader=reader
        )
        read.answered([shown["chunk_id"]], len(shown["text"]))
    return shown


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


@router.get(
    "/{name}/builds/{build}",
    response=with_errors({200: BuildStatusOut}, 404),
    summary="One build's status and outcome",
)
def read_build(request, name: str, build: int):
    collection = agents.get_collection(agent=request.auth.agent, name=name)
    return build_status.build_status(run=build_status.get_build(collection=collection, build_id=build))


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
