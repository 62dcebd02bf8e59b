"""Memory's MCP tools, `store` and `recall`: thin adapters over the memory services.

Registered into the shared MCP transport (ragsite.mcp) when `MemoryConfig.ready` imports this module.
"""

from ragsite.mcp import Caller, Tool, register

from . import conf, services
from .models import MAX_TEXT_LENGTH


def store(caller: Caller, arguments: dict) -> dict:
    keep = services.archive_episode if arguments.get("kind") == "ep" else services.store_memory
    record, nodes = keep(agent=caller.agent, text=arguments["text"])
    answer = {"id": record.pk, "kind": record.KIND, "text_length": len(record.text)}
    if nodes is not None:
        answer["nodes"] = nodes
    return answer

def recall(caller: Caller, arguments: dict) -> dict:
    most = arguments.get("most", conf.DEFAULT_MOST)
    return {"records": services.recall(agent=caller.agent, query=arguments["query"], most=most)}

register(Tool(
    name="store",
    title="Store a memory",
    description='Keep a text in your long memory: a memory ("mem", the default) or an episode\'s summary '
    '("ep"). Answers with its id; a long record\'s nodes are built in the background ("nodes": queued).',
    input_schema={
        "type": "object",
        "properties": {
            "text": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT_LENGTH},
            "kind": {"type": "string", "enum": ["mem", "ep"], "default": "mem"},
        },
        "required": ["text"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "kind": {"type": "string", "enum": ["mem", "ep"]},
            "text_length": {"type": "integer"},
            "nodes": {"type": "object", "properties": {"status": {"type": "string"}}},
        },
        "required": ["id", "kind", "text_length"],
    },
    handler=store,
    annotations={"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False,
                 "openWorldHint": False},
))
register(Tool(
    name="recall",
    title="Recall memories",
    description="Find your stored memories and episodes that best match a query, best first, each quoted "
    "by its most relevant excerpt.",
    input_schema={
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": conf.MAX_QUERY_LENGTH},
            "most": {"type": "integer", "minimum": 1, "maximum": conf.MAX_MOST,
                     "default": conf.DEFAULT_MOST},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "records": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "kind": {"type": "string", "enum": ["mem", "ep"]},
                        "id": {"type": "integer"},
                        "score": {"type": "number"},
                        "excerpt": {
                            "type": "object",
                            "properties": {
                                "text": {"type": "string"},
                                "node_index": {"type": ["integer", "null"]},
                                "start": {"type": "integer"},
                                "end": {"type": "integer"},
                            },
                            "required": ["text", "node_index", "start", "end"],
                        },
                    },
                    "required": ["kind", "id", "score", "excerpt"],
                },
            }
        },
        "required": ["records"],
    },
    handler=recall,
    annotations={"readOnlyHint": True, "openWorldHint": False},
))
