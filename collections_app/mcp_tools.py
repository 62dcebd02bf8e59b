"""The collections' MCP tools: `search`, `build`, `build_status`, `collections`, `measure` and `set_source`,
thin adapters.

Registered into the shared MCP transport (ragsite.mcp) when this module is imported by
`CollectionsConfig.ready`. Every input and output schema is generated from the declarations in
`collections_app.schemas`, the same models the API takes and answers; the published input schemas
carry every limit, and `check_arguments` enforces them before a handler runs.
"""

from __future__ import annotations

from ragsite import audit
from ragsite.errors import Forbidden, NotFound
from ragsite.mcp import Caller, Tool, register
from ragsite.schemas import json_schema_of, tool_input

from .mcp_citations import search_links
from .schemas.builds import BuildOut, BuildStatusIn, BuildStatusOut
from .schemas.collections import CollectionName, CollectionsOut, NoArguments, SourceIn, SourceOut
from .schemas.measure import MeasureIn, MeasureOut
from .schemas.search import SearchIn, SearchOut, quoted, search_arguments
from .services.agents import get_collection
from .services.builds import request_build
from .services.builds.status import (
    build_status,
    collection_summaries,
    get_build,
    latest_build,
    wait_for_build,
)
from .services.measure import DEFAULT_MOST, measure_collection, parse_items
from .services.origins import describe as describe_source
from .services.origins import set_source
from .services.readers.tokens import reader_named
from .services.search import search_collection

SEARCH_INPUT = tool_input(CollectionName, SearchIn)
SEARCH_ANSWER = json_schema_of(SearchOut)


def search(caller: Caller, arguments: dict) -> dict:
    reader = reader_named(reader=arguments.get("reader"), token=arguments.get("readerToken"))
    with audit.reading(
        kind=audit.SEARCH,
        channel=audit.MCP,
        key=caller.key,
        target=arguments["collection"],
        question=arguments["question"],
        reader=reader,
        on_behalf_of=arguments.get("onBehalfOf"),
    ) as read:
        answer = search_collection(
            agent=caller.agent,
            collection=arguments["collection"],
            reader=reader,
            key=caller.key,
            **search_arguments(arguments),
        )
        read.answered(*quoted(answer))
    return answer


BUILD_INPUT = tool_input(CollectionName)
BUILD_ANSWER = json_schema_of(BuildOut)


def build(caller: Caller, arguments: dict) -> dict:
    run = request_build(
        collection=get_collection(agent=caller.agent, name=arguments["collection"]), requested_by="mcp"
    )
    run.refresh_from_db()
    return {"build": run.pk, "status": run.status}


register(
    Tool(
        name="search",
        title="Search a collection",
        description="Find the paragraphs of one of your collections that answer a question, best first, "
        "each with its document, section and a score in [0, 1]; only paragraphs at or above the floor come "
        "back.",
        input_schema=SEARCH_INPUT,
        output_schema=SEARCH_ANSWER,
        handler=search,
        annotations={"readOnlyHint": True, "openWorldHint": False},
        links=search_links,
    )
)
register(
    Tool(
        name="build",
        title="Build a collection",
        description="Queue a rebuild of one of your collections from its documents; answers with the "
        "build's id and status. One build per collection runs at a time.",
        input_schema=BUILD_INPUT,
        output_schema=BUILD_ANSWER,
        handler=build,
        annotations={
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": False,
        },
    )
)


# --- measure ---

MEASURE_INPUT = tool_input(CollectionName, MeasureIn)
MEASURE_ANSWER = json_schema_of(MeasureOut)


def measure(caller: Caller, arguments: dict) -> dict:
    items = arguments["questions"]
    collection = get_collection(agent=caller.agent, name=arguments["collection"])
    if collection.per_reader:
        # A marker found or not found says whether some paragraph holds that text, whoever may read it.
        raise Forbidden(
            f'collection "{collection.name}" answers per reader; measure it in the admin', code="per_reader"
        )
    questions, controls = parse_items(items)
    return measure_collection(
        collection=collection,
        questions=questions,
        controls=controls,
        most=arguments.get("most", DEFAULT_MOST),
        min_score=arguments.get("min_score"),
    )


register(
    Tool(
        name="measure",
        title="Measure a collection",
        description="Build every chunking variant of one of your collections in memory (nothing is stored) "
        "and report, "
        "per variant, which questions found their answer, at what rank and score, the best score of each "
        "control question, and whether a floor separates answers from controls.",
        input_schema=MEASURE_INPUT,
        output_schema=MEASURE_ANSWER,
        handler=measure,
        annotations={"readOnlyHint": True, "openWorldHint": False},
    )
)


# --- build outcomes and the collections list ---

BUILD_STATUS_INPUT = tool_input(CollectionName, BuildStatusIn)
BUILD_STATUS_ANSWER = json_schema_of(BuildStatusOut)


def build_status_tool(caller: Caller, arguments: dict) -> dict:
    collection = get_collection(agent=caller.agent, name=arguments["collection"])
    if arguments.get("build") is not None:
        run = get_build(collection=collection, build_id=arguments["build"])
    else:
        run = latest_build(collection)
        if run is None:
            raise NotFound(f'collection "{collection.name}" has never been built', code="never_built")
    run = wait_for_build(run=run, seconds=arguments.get("wait_seconds", 0))
    return build_status(run=run)


COLLECTIONS_ANSWER = json_schema_of(CollectionsOut)


def collections_tool(caller: Caller, arguments: dict) -> dict:
    return {"collections": collection_summaries(agent=caller.agent)}


register(
    Tool(
        name="build_status",
        title="A build's outcome",
        description="Status, progress and outcome of a build of one of your collections (the latest unless "
        "`build` "
        "names one): paragraphs, documents read and reused, refused documents by name, warnings, problems, "
        "model, error, and whether it waits for a task worker. `wait_seconds` waits for it to finish first.",
        input_schema=BUILD_STATUS_INPUT,
        output_schema=BUILD_STATUS_ANSWER,
        handler=build_status_tool,
        annotations={"readOnlyHint": True, "openWorldHint": False},
    )
)
register(
    Tool(
        name="collections",
        title="Your collections",
        description="The collections you can search, each with what it is built from and its last build's "
        "outcome (null: never built).",
        input_schema=tool_input(NoArguments),
        output_schema=COLLECTIONS_ANSWER,
        handler=collections_tool,
        annotations={"readOnlyHint": True, "openWorldHint": False},
    )
)


# --- set_source ---

SET_SOURCE_INPUT = tool_input(CollectionName, SourceIn)
SET_SOURCE_ANSWER = json_schema_of(SourceOut)


def set_source_tool(caller: Caller, arguments: dict) -> dict:
    collection = get_collection(agent=caller.agent, name=arguments["collection"])
    set_source(
        collection=collection,
        kind=arguments["kind"],
        settings=arguments.get("settings"),
        credentials=arguments.get("credentials"),
    )
    return describe_source(collection)


register(
    Tool(
        name="set_source",
        title="Where a collection's documents come from",
        description="Make one of your collections read a folder, a git repository (url, branch, path), "
        "a WebDAV share (url, path), an S3-compatible bucket (endpoint_url, bucket, prefix, region) or a "
        "website (start_url, sitemap_url, include, exclude, max_pages, max_depth); "
        "credentials are kept encrypted, never shown. The next build or sync check reads the new source; "
        "the last build answers until then.",
        input_schema=SET_SOURCE_INPUT,
        output_schema=SET_SOURCE_ANSWER,
        handler=set_source_tool,
        annotations={
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": True,
        },
    )
)
