"""The MCP tool `measure`: a collection's variants measured against questions whose answers are known.

Imported at the end of `collections_app.mcp`, which registers it with the other collection tools.
A thin adapter over `services.measure.measure_collection`.

The published schema carries every limit (1 to MAX_QUESTIONS items, each a `QUESTION_ITEM`), and
`mcp.check_arguments` enforces it before the handler runs.
"""

from __future__ import annotations

from ragsite.errors import Forbidden

from .mcp import COLLECTION_NAME, Caller, Tool, register
from .services.agents import get_collection
from .services.measure import DEFAULT_MOST, MAX_MARKER_CHARS, MAX_QUESTIONS, measure_collection, parse_items
from .services.search import MAX_MOST, MAX_QUESTION_CHARS

QUESTION_ITEM = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 1, "maxLength": MAX_QUESTION_CHARS},
        "answer": {"type": "string", "minLength": 1, "maxLength": MAX_MARKER_CHARS,
                   "description": "Text the answering paragraph contains (compared case-insensitively)."},
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
            "description": f"1 to {MAX_QUESTIONS} items, each {{\"question\": 1-{MAX_QUESTION_CHARS} characters, "
            '"answer": "text the answering paragraph contains"} or {"question": ..., "control": true} for a '
            "question the documents do not answer.",
        },
        "most": {"type": "integer", "minimum": 1, "maximum": MAX_MOST, "default": DEFAULT_MOST,
                 "description": "Paragraphs returned per question and variant."},
        "min_score": {"type": ["number", "null"], "minimum": 0, "maximum": 1,
                      "description": "A floor; by default none, so every returned paragraph carries its score."},
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
        "corpus": {"type": "object", "properties": {
            "documents": {"type": "integer"}, "digest": {"type": "string"},
            "refused": {"type": "array", "items": {"type": "string"}},
        }},
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
                "required": ["method", "size", "overlap", "around", "paragraphs", "found", "questions",
                             "controls", "floor_range"],
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
        raise Forbidden(f'collection "{collection.name}" answers per reader; measure it in the admin',
                        code="per_reader")
    questions, controls = parse_items(items)
    return measure_collection(collection=collection, questions=questions, controls=controls,
                              most=arguments.get("most", DEFAULT_MOST), min_score=arguments.get("min_score"))


register(Tool(
    name="measure",
    title="Measure a collection",
    description="Build every chunking variant of one of your collections in memory (nothing is stored) and report, "
    "per variant, which questions found their answer, at what rank and score, the best score of each control "
    "question, and whether a floor separates answers from controls.",
    input_schema=MEASURE_INPUT,
    output_schema=MEASURE_ANSWER,
    handler=measure,
    annotations={"readOnlyHint": True, "openWorldHint": False},
))
