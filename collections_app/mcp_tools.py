"""The collections' MCP tools: `search`, `build`, `build_status`, `collections` and `measure`, thin adapters.

Registered into the shared MCP transport (ragsite.mcp) when this module is imported by
`CollectionsConfig.ready`. The published schemas carry every limit, and `check_arguments` enforces
them before a handler runs.
"""

from __future__ import annotations

from ragsite.errors import Forbidden, NotFound
from ragsite.mcp import Caller, Tool, register

from .limits import DEFAULT_MOST as SEARCH_MOST
from .limits import MAX_ANSWER_CHARS, MAX_AROUND, MAX_MOST, MAX_QUESTION_CHARS, MIN_ANSWER_CHARS
from .mcp_citations import search_links
from .services.agents import get_collection
from .services.build_status import (
    MAX_WAIT_SECONDS,
    build_status,
    collection_summaries,
    get_build,
    latest_build,
    wait_for_build,
)
from .services.builds import request_build
from .services.measure import DEFAULT_MOST, MAX_MARKER_CHARS, MAX_QUESTIONS, measure_collection, parse_items
from .services.search import search_collection
from .services.search.answer import mcp_output_schema

COLLECTION_NAME = {
    "type": "string",
    "minLength": 1,
    "maxLength": 100,
    "description": "The name of one of your collections.",
}

SEARCH_INPUT = {
    "type": "object",
    "properties": {
        "collection": COLLECTION_NAME,
        "question": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_QUESTION_CHARS,
            "description": "What you want to know, in words.",
        },
        "reader": {
            "type": ["string", "null"],
            "maxLength": 200,
            "description": "The person you are reading for; required when the collection answers per reader.",
        },
        "onBehalfOf": {
            "type": ["string", "null"],
            "maxLength": 100,
            "description": "The agent any model call (the judge) is charged to.",
        },
        "most": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_MOST,
            "default": SEARCH_MOST,
            "description": "At most this many paragraphs.",
        },
        "around": {
            "type": ["integer", "null"],
            "minimum": 0,
            "maximum": MAX_AROUND,
            "description": "Paragraphs either side of each hit to stitch in; default: the collection's.",
        },
        "min_score": {
            "type": ["number", "null"],
            "minimum": 0,
            "maximum": 1,
            "description": "The floor: nothing scoring below it comes back; 0 turns it off.",
        },
        "max_chars": {
            "type": ["integer", "null"],
            "minimum": MIN_ANSWER_CHARS,
            "maximum": MAX_ANSWER_CHARS,
            "description": "Characters of text the answer may hold; default: the server's.",
        },
        "filters": {
            "type": ["object", "null"],
            "description": "Only paragraphs matching this take part: "
            '{"type": "eq"|"ne"|"gt"|"gte"|"lt"|"lte"|"in"|"nin", "key", "value"} '
            'or {"type": "and"|"or", "filters": [...]}; keys are document '
            'attributes, or "document", "section", "page".',
        },
    },
    "required": ["collection", "question"],
    "additionalProperties": False,
}

# Generated from the one declaration of the answer (services/search/answer.py).
SEARCH_ANSWER = mcp_output_schema()


def search(caller: Caller, arguments: dict) -> dict:
    return search_collection(
        agent=caller.agent,
        collection=arguments["collection"],
        question=arguments["question"],
        reader=arguments.get("reader"),
        on_behalf_of=arguments.get("onBehalfOf"),
        most=arguments.get("most", SEARCH_MOST),
        around=arguments.get("around"),
        min_score=arguments.get("min_score"),
        max_chars=arguments.get("max_chars"),
        key=caller.key,
        filters=arguments.get("filters"),
    )


BUILD_INPUT = {
    "type": "object",
    "properties": {"collection": COLLECTION_NAME},
    "required": ["collection"],
    "additionalProperties": False,
}

BUILD_ANSWER = {
    "type": "object",
    "properties": {"build": {"type": "integer"}, "status": {"type": "string"}},
    "required": ["build", "status"],
}


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

QUESTION_ITEM = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
        "answer": {
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_MARKER_CHARS,
            "description": "Text the answering paragraph contains (compared case-insensitively).",
        },
        "control": {"type": "boolean", "description": "true: the documents do not answer this question."},
    },
    "required": ["question"],
    "additionalProperties": False,
}

MEASURE_INPUT = {
    "type": "object",
    "properties": {
        "collection": COLLECTION_NAME,
        "questions": {
            "type": "array",
            "minItems": 1,
            "maxItems": MAX_QUESTIONS,
            "items": QUESTION_ITEM,
            "description": f"1 to {MAX_QUESTIONS} items, "
            f'each {{"question": 1-{MAX_QUESTION_CHARS} characters, '
            '"answer": "text the answering paragraph contains"} or {"question": ..., "control": true} for a '
            "question the documents do not answer.",
        },
        "most": {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_MOST,
            "default": DEFAULT_MOST,
            "description": "Paragraphs returned per question and variant.",
        },
        "min_score": {
            "type": ["number", "null"],
            "minimum": 0,
            "maximum": 1,
            "description": "A floor; by default none, so every returned paragraph carries its score.",
        },
    },
    "required": ["collection", "questions"],
    "additionalProperties": False,
}

_FLOOR_RANGE = {
    "type": "object",
    "properties": {
        "lowest_answer": {"type": ["number", "null"]},
        "highest_control": {"type": ["number", "null"]},
        "separates": {"type": ["boolean", "null"]},
    },
    "required": ["lowest_answer", "highest_control", "separates"],
}

MEASURE_ANSWER = {
    "type": "object",
    "properties": {
        "collection": {"type": "string"},
        "model": {"type": "string"},
        "dimensions": {"type": "integer"},
        "mode": {"type": "string"},
        "corpus": {
            "type": "object",
            "properties": {
                "documents": {"type": "integer"},
                "digest": {"type": "string"},
                "refused": {"type": "array", "items": {"type": "string"}},
            },
        },
        "settings": {"type": "object"},
        "questions": {"type": "integer"},
        "controls": {"type": "integer"},
        "variants": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "method": {"type": "string"},
                    "size": {"type": ["integer", "null"]},
                    "overlap": {"type": "integer"},
                    "around": {"type": "integer"},
                    "paragraphs": {"type": "integer"},
                    "found": {"type": "integer"},
                    "questions": {"type": "array"},
                    "controls": {"type": "array"},
                    "floor_range": _FLOOR_RANGE,
                },
                "required": [
                    "method",
                    "size",
                    "overlap",
                    "around",
                    "paragraphs",
                    "found",
                    "questions",
                    "controls",
                    "floor_range",
                ],
            },
        },
        "skipped": {"type": "array"},
    },
    "required": ["collection", "model", "dimensions", "corpus", "settings", "variants", "skipped"],
}


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

BUILD_PROGRESS = {
    "type": "object",
    "properties": {
        "phase": {
            "type": "string",
            "enum": ["queued", "reading documents", "embedding paragraphs", "saving", "finished"],
        },
        **{
            name: {"type": "integer"}
            for name in ("documents_done", "documents_total", "paragraphs_done", "paragraphs_total")
        },
    },
}

BUILD_STATUS_ANSWER = {
    "type": "object",
    "properties": {
        "build": {"type": "integer"},
        "collection": {"type": "string"},
        "status": {
            "type": "string",
            "enum": ["queued", "running", "succeeded", "succeeded_with_review", "failed", "refused"],
        },
        "percent": {"type": "integer"},
        "progress": BUILD_PROGRESS,
        "passages": {"type": "integer"},
        "documents_read": {"type": "integer"},
        "documents_reused": {"type": "integer"},
        "documents_refused": {"type": "integer"},
        "paragraphs_embedded": {"type": "integer"},
        "refused": {
            "type": ["array", "null"],
            "items": {"type": "string"},
            "description": "null: not recorded yet; []: nothing refused; the names otherwise.",
        },
        "warnings": {"type": "array", "items": {"type": "string"}},
        "problems": {"type": "array", "items": {"type": "string"}},
        "model": {"type": ["string", "null"]},
        "previous_model": {"type": ["string", "null"]},
        "error": {"type": ["string", "null"]},
        "waiting": {
            "type": ["string", "null"],
            "description": "Set when a queued build waits for a task worker that is not running.",
        },
        "requested_by": {"type": "string"},
        "known_answers": {
            "type": ["object", "null"],
            "description": "How this build did on the collection's known answers (null: none measured): "
            "found_at_1, found_at_5, floor, lost, warnings, … as the API's known-answers report.",
        },
        "created_at": {"type": "string"},
        "started_at": {"type": ["string", "null"]},
        "finished_at": {"type": ["string", "null"]},
        "seconds": {"type": ["number", "null"]},
    },
    "required": [
        "build",
        "collection",
        "status",
        "percent",
        "passages",
        "refused",
        "warnings",
        "problems",
        "model",
        "error",
        "waiting",
    ],
}

BUILD_STATUS_INPUT = {
    "type": "object",
    "properties": {
        "collection": COLLECTION_NAME,
        "build": {
            "type": ["integer", "null"],
            "minimum": 1,
            "description": "The build's id, as `build` answered; default: the collection's latest build.",
        },
        "wait_seconds": {
            "type": "number",
            "minimum": 0,
            "maximum": MAX_WAIT_SECONDS,
            "default": 0,
            "description": f"Wait up to this many seconds (at most {MAX_WAIT_SECONDS}) for the build "
            "to finish before answering.",
        },
    },
    "required": ["collection"],
    "additionalProperties": False,
}


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


COLLECTIONS_ANSWER = {
    "type": "object",
    "properties": {
        "collections": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "built_from": {"type": "string"},
                    "folder": {"type": "string"},
                    "method": {"type": "string"},
                    "per_reader": {"type": "boolean"},
                    "last_build": {"anyOf": [BUILD_STATUS_ANSWER, {"type": "null"}]},
                },
                "required": ["name", "built_from", "folder", "method", "per_reader", "last_build"],
            },
        },
    },
    "required": ["collections"],
}


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
        input_schema={"type": "object", "properties": {}, "additionalProperties": False},
        output_schema=COLLECTIONS_ANSWER,
        handler=collections_tool,
        annotations={"readOnlyHint": True, "openWorldHint": False},
    )
)
