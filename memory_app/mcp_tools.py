"""Memory's MCP tools, `store`, `recall`, `list_records`, `read_record` and `change_record`: thin
adapters over the memory services.

Registered into the shared MCP transport (ragsite.mcp) when `MemoryConfig.ready` imports this module.
Every input and output schema is generated from the declarations in `memory_app.schemas`, the same
models the API takes and answers.
"""

from datetime import datetime

from django.utils.dateparse import parse_datetime

from ragsite import audit
from ragsite.mcp import Caller, InvalidArguments, Tool, register
from ragsite.schemas import json_schema_of, tool_input

from . import services
from .schemas import (
    ChangedOut,
    KindIn,
    ListOut,
    ListQuery,
    RecallIn,
    RecallOut,
    RecordChangeIn,
    RecordIn,
    RecordOut,
    RecordRef,
    StoredOut,
    change_arguments,
    recall_arguments,
    store_arguments,
)
from .services.reading import DEFAULT_PAGE, RECALLED, listing_quoted, recall_quoted, record_quoted


def store(caller: Caller, arguments: dict) -> dict:
    keep = services.archive_episode if arguments.get("kind") == "ep" else services.store_memory
    record, nodes = keep(agent=caller.agent, **store_arguments(arguments))
    answer = {"id": record.pk, "kind": record.KIND, "text_length": len(record.text)}
    if nodes is not None:
        answer["nodes"] = nodes
    return answer


def recall(caller: Caller, arguments: dict) -> dict:
    # `question`, as in collection search; `query` is its deprecated old name (docs/memory.md).
    if ("question" in arguments) == ("query" in arguments):
        raise InvalidArguments(
            "recall takes 'question' (or its deprecated alias 'query'), exactly one of them"
        )
    recalled = recall_arguments(arguments)
    with audit.reading(
        kind=audit.RECALL, channel=audit.MCP, key=caller.key, target=RECALLED, question=recalled["query"]
    ) as read:
        answer = services.recall(agent=caller.agent, **recalled)
        read.answered(*recall_quoted(answer))
    return answer


def _json_times(item: dict) -> dict:
    return {key: value.isoformat() if isinstance(value, datetime) else value for key, value in item.items()}


def _moment(arguments: dict, name: str) -> datetime | None:
    if arguments.get(name) is None:
        return None
    try:
        moment = parse_datetime(arguments[name])
    except ValueError:  # well-formed but no such day (30 February) or hour
        moment = None
    if moment is None:
        raise InvalidArguments(f"{name} must be an ISO 8601 date and time that exists")
    return moment


def list_records(caller: Caller, arguments: dict) -> dict:
    kind = arguments.get("kind", "mem")
    since, until = _moment(arguments, "since"), _moment(arguments, "until")
    with audit.reading(kind=audit.RECORDS, channel=audit.MCP, key=caller.key, target=kind) as read:
        page = services.list_records(
            agent=caller.agent,
            kind=kind,
            limit=arguments.get("limit", DEFAULT_PAGE),
            cursor=arguments.get("cursor"),
            since=since,
            until=until,
        )
        read.answered(*listing_quoted(page))
    return {"records": [_json_times(item) for item in page["records"]], "next": page["next"]}


def read_record(caller: Caller, arguments: dict) -> dict:
    kind = arguments["kind"]
    with audit.reading(kind=audit.RECORD, channel=audit.MCP, key=caller.key, target=kind) as read:
        record = services.read_record(agent=caller.agent, kind=kind, id=arguments["id"])
        read.answered(*record_quoted(record))
    return _json_times(record)


def change_record(caller: Caller, arguments: dict) -> dict:
    changes = {name: value for name, value in arguments.items() if name not in RecordRef.model_fields}
    record = services.change_record(
        agent=caller.agent, kind=arguments["kind"], id=arguments["id"], **change_arguments(changes)
    )
    return _json_times(services.changed_answer(record))


register(
    Tool(
        name="store",
        title="Store a memory",
        description='Keep a text in your long memory: a memory ("mem", the default) or an episode\'s summary '
        '("ep"), with optional tags and the time what it states holds (valid_from, valid_until). Answers '
        'with its id; a long record\'s nodes are built in the background ("nodes": queued).',
        input_schema=tool_input(RecordIn, KindIn),
        output_schema=json_schema_of(StoredOut),
        handler=store,
        annotations={
            "readOnlyHint": False,
            "destructiveHint": False,
            "idempotentHint": False,
            "openWorldHint": False,
        },
    )
)
register(
    Tool(
        name="recall",
        title="Recall memories",
        description="Find the excerpts of your memories and episodes that best answer a question, "
        "best first, within a character budget (max_chars): several excerpts may come from one long "
        "record, a short record comes whole, and the last excerpt is cut at a sentence boundary when "
        "the budget runs out. since/until (creation time), valid_at, kinds and tags keep only the "
        "records they match, before ranking. An excerpt another one in the answer states anew "
        "(a newer value for the same thing) says so in superseded_by.",
        input_schema=tool_input(RecallIn),
        output_schema=json_schema_of(RecallOut),
        handler=recall,
        annotations={"readOnlyHint": True, "openWorldHint": False},
    )
)

register(
    Tool(
        name="list_records",
        title="List memories or episodes",
        description='Your memories (kind "mem", the default) or episodes ("ep"), newest first, a page '
        "at a time: each with its length, times, node status and opening. Pass `next` back as `cursor` "
        "for the next page; `since` / `until` (ISO 8601) bound the creation time.",
        input_schema=tool_input(KindIn, ListQuery),
        output_schema=json_schema_of(ListOut),
        handler=list_records,
        annotations={"readOnlyHint": True, "openWorldHint": False},
    )
)
register(
    Tool(
        name="read_record",
        title="Read a memory or episode",
        description="One of your records whole: its text, lengths, times, whether it is locked, and its "
        "nodes (status, and each node's offsets into the text).",
        input_schema=tool_input(RecordRef),
        output_schema=json_schema_of(RecordOut),
        handler=read_record,
        annotations={"readOnlyHint": True, "openWorldHint": False},
    )
)
register(
    Tool(
        name="change_record",
        title="Change a record's tags and validity",
        description="Change the tags and the validity (valid_from, valid_until) of one of your records, "
        "named by kind and id: only the fields you send change; null clears one (tags: none; a validity "
        "end: open). Mark a record out of date by giving it a valid_until. The text is not changed here. "
        "Answers with the record's tags, validity and updated_at.",
        input_schema=tool_input(RecordRef, RecordChangeIn),
        output_schema=json_schema_of(ChangedOut),
        handler=change_record,
        annotations={
            "readOnlyHint": False,
            "destructiveHint": True,
            "idempotentHint": True,
            "openWorldHint": False,
        },
    )
)
