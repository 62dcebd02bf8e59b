"""Memory's MCP tools, `store` and `recall`, registered into the collections app's MCP endpoint.

They live here because memory_app may import collections_app and never the
reverse (DESIGN §1); `MemoryConfig.ready` registers them.
"""

from collections_app.mcp import Caller, Tool, register


def register_memory_tools() -> None:
    from . import conf as memory_conf
    from .models import MAX_TEXT_LENGTH

    def store(caller: Caller, arguments: dict) -> dict:
        from . import services

        keep = services.archive_episode if arguments.get("kind") == "ep" else services.store_memory
        record, nodes = keep(agent=caller.agent, text=arguments["text"])
        answer = {"id": record.pk, "kind": record.KIND, "text_length": len(record.text)}
        if nodes is not None:
            answer["nodes"] = nodes
        return answer

    def recall(caller: Caller, arguments: dict) -> dict:
        from . import services

        most = arguments.get("most", memory_conf.DEFAULT_MOST)
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
                "query": {"type": "string", "minLength": 1, "maxLength": memory_conf.MAX_QUERY_LENGTH},
                "most": {"type": "integer", "minimum": 1, "maximum": memory_conf.MAX_MOST,
                         "default": memory_conf.DEFAULT_MOST},
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
