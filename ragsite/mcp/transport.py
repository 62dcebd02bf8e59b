"""The MCP endpoint at /mcp: Streamable HTTP, stateless, answered with JSON from a plain Django view.

Why not the official SDK's server: it is an ASGI (Starlette) application whose session manager
needs a task group opened by the ASGI lifespan, which neither a WSGI deployment (gunicorn sync
workers) nor Django's own ASGI handler provides. The transport itself allows what this server
needs and nothing more: each POST carries one JSON-RPC message (or, at protocol 2025-03-26, a
batch) and is answered with `Content-Type: application/json`; notifications get 202; there is no
session and no server-initiated stream, so GET and DELETE answer 405. Both eras are spoken on the
one endpoint: the handshake era (`initialize`, then the version in a header) and the stateless
2026-07-28 (`server/discover`, the version and client capabilities in every request's `_meta`,
checked by `modern`). docs/mcp.md has the rest.

Every request is authenticated by an agent key (`Authorization: Bearer <key>`), like the JSON
API. The tools are thin adapters over the services; a service's `RagsiteError` comes back as a
tool result with `isError: true` (MCP treats tool failures as results, not protocol errors).
Nothing here logs an argument, a question or a paragraph.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.db import DatabaseError
from django.http import HttpResponse, JsonResponse
from django.http.request import validate_host
from django.views.decorators.csrf import csrf_exempt

from ragsite.bodies import BadBody, parse_json
from ragsite.errors import RagsiteError, error_body, store_busy

from . import modern
from .protocol import (
    ASSUMED_VERSION,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_LEGACY,
    LEGACY_VERSIONS,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    PROTOCOL_VERSION_HEADER,
    PROTOCOL_VERSIONS,
    RESOURCE_NOT_FOUND,
    SERVER_NAME,
    UNSUPPORTED_PROTOCOL_VERSION,
    at_least,
    is_modern,
)
from .registry import RESOURCES, TOOLS, Caller, authenticated_key, check_arguments, resource_for

logger = logging.getLogger("ragsite.mcp")

MAX_BODY_BYTES = 1024 * 1024
MAX_BATCH = 32
LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})

INSTRUCTIONS = (
    "ragsite keeps this agent's knowledge collections and long memories. Use `search` to find the "
    "paragraphs of one of your collections that answer a question (each comes with its document, "
    "section and score; nothing below the floor is returned), `build` to queue a rebuild of a "
    "collection after its documents changed, `store` to keep a memory and `recall` to find "
    "stored memories again."
)


def _server_version() -> str:
    try:
        return metadata.version("ragsite")
    except metadata.PackageNotFoundError:  # running from a checkout that was never installed
        return "0"


# --- JSON-RPC methods -----------------------------------------------------------------------


class RpcError(Exception):
    def __init__(self, code: int, message: str, *, data: Any = None, status: int = 200):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
        self.status = status


def server_info() -> dict:
    return {"name": SERVER_NAME, "version": _server_version()}


def capabilities() -> dict:
    # The tool list and the resource families do not change while a server runs.
    offered = {"tools": {"listChanged": False}}
    if RESOURCES:
        offered["resources"] = {"subscribe": False, "listChanged": False}
    return offered


def initialize(params: dict, caller: Caller, version: str) -> dict:
    requested = params.get("protocolVersion")
    if not isinstance(requested, str):
        raise RpcError(INVALID_PARAMS, "initialize needs protocolVersion, a string")
    for name in ("capabilities", "clientInfo"):
        if name in params and not isinstance(params[name], dict):
            raise RpcError(INVALID_PARAMS, f"initialize: {name} must be an object")
    return {
        # The client's version when it is one of the handshake era's, else the newest of those: a
        # 2026-era version is never agreed by a handshake (that era has none; see server/discover).
        "protocolVersion": requested if requested in LEGACY_VERSIONS else LATEST_LEGACY,
        "capabilities": capabilities(),
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    }


def server_discover(params: dict, caller: Caller, version: str) -> dict:
    return modern.discover(capabilities(), server_info(), INSTRUCTIONS)


def ping(params: dict, caller: Caller, version: str) -> dict:
    return {}


def _no_cursor(params: dict, what: str) -> None:
    if params.get("cursor") is not None:
        # Every list fits on its first page, so no cursor this server could have issued exists.
        raise RpcError(INVALID_PARAMS, f"invalid cursor: the {what} list has one page")


def list_tools(params: dict, caller: Caller, version: str) -> dict:
    _no_cursor(params, "tool")
    return {"tools": [tool.describe(version) for tool in TOOLS.values()]}


def call_tool(params: dict, caller: Caller, version: str) -> dict:
    name = params.get("name")
    if not isinstance(name, str):
        raise RpcError(INVALID_PARAMS, "tools/call needs the tool's name, a string")
    tool = TOOLS.get(name)
    if tool is None:
        raise RpcError(INVALID_PARAMS, f"unknown tool {name[:100]!r}; the tools are {', '.join(TOOLS)}")
    arguments = params.get("arguments")
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise RpcError(INVALID_PARAMS, "tools/call: arguments must be an object")
    try:
        try:
            checked = check_arguments(tool.input_schema, arguments)
            answer = tool.handler(caller, checked)
        except DatabaseError as exc:  # a locked store is a tool error asking to retry, not an internal one
            busy = store_busy(exc)
            if busy is None:
                raise
            raise busy from None
    except RagsiteError as exc:
        logger.info("mcp tool %s for %s: %s", name, caller.agent.agent_id, exc.code)
        return tool_result(error_body(exc.code, exc.message), version, is_error=True)
    logger.info("mcp tool %s for %s: ok", name, caller.agent.agent_id)
    links = tool.links(checked, answer) if tool.links is not None and at_least(version, "2025-06-18") else []
    return tool_result(answer, version, links=links)


def tool_result(payload: dict, version: str, *, is_error: bool = False, links: list[dict] = ()) -> dict:
    """A tools/call result: the JSON as text for every client, and as `structuredContent` from 2025-06-18,
    followed by a `resource_link` for each thing the answer cites (also from 2025-06-18)."""
    result = {
        "content": [{"type": "text", "text": json.dumps(payload, ensure_ascii=False, default=str)}, *links],
        "isError": is_error,
    }
    if at_least(version, "2025-06-18"):
        result["structuredContent"] = payload
    return result


def list_resources(params: dict, caller: Caller, version: str) -> dict:
    # Cited paragraphs are reached through the links a search answers with, never enumerated.
    _no_cursor(params, "resource")
    return {"resources": []}


def list_resource_templates(params: dict, caller: Caller, version: str) -> dict:
    _no_cursor(params, "resource template")
    return {"resourceTemplates": [template.describe() for template in RESOURCES.values()]}


def read_resource(params: dict, caller: Caller, version: str) -> dict:
    uri = params.get("uri")
    if not isinstance(uri, str):
        raise RpcError(INVALID_PARAMS, "resources/read needs the resource's uri, a string")
    template = resource_for(uri)
    try:
        if template is None:
            raise RagsiteError("no resource at this uri", code="unknown_resource")
        return {"contents": [template.read(caller, uri)]}
    except RagsiteError as exc:
        # "Resource not found" is -32602 from 2026-07-28; -32002 before it.
        logger.info("mcp resources/read for %s: %s", caller.agent.agent_id, exc.code)
        code = INVALID_PARAMS if is_modern(version) else RESOURCE_NOT_FOUND
        raise RpcError(
            code, f"resource not found: {exc.message}", data={"uri": uri[:500], "code": exc.code}
        ) from None


Method = Callable[[dict, Caller, str], dict]
LEGACY_METHODS: dict[str, Method] = {
    "initialize": initialize,
    "ping": ping,
    "tools/list": list_tools,
    "tools/call": call_tool,
}
RESOURCE_METHODS: dict[str, Method] = {
    "resources/list": list_resources,
    "resources/templates/list": list_resource_templates,
    "resources/read": read_resource,
}
# 2026-07-28 removed initialize and ping; server/discover replaces the handshake.
MODERN_METHODS: dict[str, Method] = {
    "server/discover": server_discover,
    "tools/list": list_tools,
    "tools/call": call_tool,
}
# Who may reuse a 2026-era answer: everyone (the same for every caller) or this key only.
CACHE_SCOPE = {
    "server/discover": None,
    "tools/list": "public",
    "resources/list": "public",
    "resources/templates/list": "public",
    "resources/read": "private",
}


def _method(name: str, version: str) -> Method | None:
    methods = MODERN_METHODS if is_modern(version) else LEGACY_METHODS
    handler = methods.get(name)
    if handler is None and RESOURCES:
        handler = RESOURCE_METHODS.get(name)
    return handler


# --- One JSON-RPC message ---------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """The answer to one message: its JSON-RPC body and the HTTP status it travels with alone."""

    body: dict
    status: int = 200


def _valid_id(value: Any) -> bool:
    # MCP: "Requests MUST include a string or integer ID", never null.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def rpc_error(id_: Any, code: int, message: str, data: Any = None) -> dict:
    error = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": id_ if _valid_id(id_) else None, "error": error}


def _refused(id_: Any, code: int, message: str, status: int, data: Any = None) -> Reply:
    return Reply(rpc_error(id_, code, message, data), status)


def handle_message(
    message: Any, caller: Caller, version: str, *, in_batch: bool = False, headers=None
) -> Reply | None:
    """The reply to one JSON-RPC message, or None when it needs none (a notification, a response).

    `headers` is given for a message that travels alone: a 2026-era one (named by the
    MCP-Protocol-Version header or by its `_meta`) is checked against them (`modern`).
    """
    if not isinstance(message, dict):
        return _refused(None, INVALID_REQUEST, "a JSON-RPC message is an object", 400)
    id_ = message.get("id")
    if message.get("jsonrpc") != "2.0":
        return _refused(id_, INVALID_REQUEST, 'jsonrpc must be "2.0"', 400)
    if "method" not in message:
        if "id" in message and ("result" in message or "error" in message):
            return None  # a response to a request of ours; this server sends none, so nothing waits for it
        return _refused(id_, INVALID_REQUEST, "a request needs a method", 400)
    method = message["method"]
    if not isinstance(method, str):
        return _refused(id_, INVALID_REQUEST, "method must be a string", 400)
    is_request = "id" in message
    if is_request and not _valid_id(id_):
        return _refused(None, INVALID_REQUEST, "id must be a string or an integer", 400)
    params = message.get("params")
    if not is_request:
        # notifications/initialized, notifications/cancelled, ...: a stateless server keeps nothing
        # to update, and a notification is never answered, not even with an error.
        return None
    if params is None:
        params = {}
    elif isinstance(params, list):
        return _refused(id_, INVALID_PARAMS, "params must be an object (MCP uses named parameters)", 200)
    elif not isinstance(params, dict):
        return _refused(id_, INVALID_REQUEST, "params must be an object", 400)
    if headers is not None and (is_modern(version) or modern.carries_meta_version(message)):
        try:
            version = modern.request_version(method, params, headers)
        except modern.EnvelopeError as exc:
            return _refused(id_, exc.code, exc.message, exc.status, exc.data)
    handler = _method(method, version)
    if handler is None:
        # 2026-07-28: an unknown method is a 404, which tells a modern server from a missing endpoint.
        return _refused(
            id_, METHOD_NOT_FOUND, f"method not found: {method[:100]}", 404 if is_modern(version) else 200
        )
    if method == "initialize" and in_batch:
        return _refused(id_, INVALID_REQUEST, "initialize must not be part of a batch", 400)
    try:
        result = handler(params, caller, version)
    except RpcError as exc:
        return _refused(id_, exc.code, exc.message, exc.status, exc.data)
    except Exception as exc:
        # The exception's text may quote input; log its type, not its arguments.
        logger.error("mcp %s failed with %s", method, type(exc).__name__, exc_info=exc)
        return _refused(id_, INTERNAL_ERROR, "the server failed to answer this request", 200)
    if is_modern(version) and method != "server/discover":
        result = modern.decorate(
            result,
            server_info(),
            cacheable=CACHE_SCOPE.get(method),
            ttl_ms=0 if CACHE_SCOPE.get(method) == "private" else modern.LIST_TTL_MS,
        )
    return Reply({"jsonrpc": "2.0", "id": id_, "result": result})


# --- The HTTP side ----------------------------------------------------------------------------


def _refuse(status: int, code: str, message: str, headers: dict | None = None) -> JsonResponse:
    """An HTTP-level refusal, before any JSON-RPC is read, in the project's error shape."""
    response = JsonResponse(error_body(code, message), status=status)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def _json(body: Any, status: int = 200) -> JsonResponse:
    return JsonResponse(body, status=status, safe=False, json_dumps_params={"ensure_ascii": False})


def origin_allowed(origin: str | None) -> bool:
    """No Origin (not a browser), a local one, or one whose host is in ALLOWED_HOSTS.

    A bare "*" in ALLOWED_HOSTS does not admit every browser origin: that is what DNS
    rebinding needs, and the spec asks servers to refuse it.
    """
    if origin is None:
        return True
    try:
        parts = urlsplit(origin)
        host = parts.hostname
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not host:
        return False
    if host in LOCAL_HOSTS:
        return True
    return validate_host(host, [h for h in settings.ALLOWED_HOSTS if h != "*"])


def _accepts_json(accept: str) -> bool:
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(kinds & {"application/json", "application/*", "*/*"})


def _parse(body: bytes) -> Any:
    return parse_json(body)  # nesting, NaN and lone surrogates refused as the API refuses them


@csrf_exempt  # bearer keys, no cookies: nothing for a cross-site request to ride on
def mcp_endpoint(request) -> HttpResponse:
    if request.method != "POST":
        return _refuse(
            405,
            "method_not_allowed",
            "this MCP endpoint is stateless: POST JSON-RPC messages; it opens no stream (GET) "
            "and has no session to end (DELETE)",
            headers={"Allow": "POST"},
        )
    if not origin_allowed(request.headers.get("Origin")):
        return _refuse(403, "forbidden_origin", "requests from this Origin are not accepted")
    key = authenticated_key(request)
    if key is None:
        return _refuse(
            401,
            "unauthorized",
            "a valid API key is required: Authorization: Bearer <key>",
            headers={"WWW-Authenticate": "Bearer"},
        )
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > MAX_BODY_BYTES:
        return _refuse(413, "too_large", f"a request body is at most {MAX_BODY_BYTES} bytes")
    if (request.content_type or "").lower() != "application/json":
        return _refuse(415, "unsupported_media_type", "the body must be Content-Type: application/json")
    if not _accepts_json(request.headers.get("Accept") or "*/*"):
        return _refuse(406, "not_acceptable", "this server answers with application/json; accept it")
    body = request.read(MAX_BODY_BYTES + 1)
    if len(body) > MAX_BODY_BYTES:
        return _refuse(413, "too_large", f"a request body is at most {MAX_BODY_BYTES} bytes")

    try:
        payload = _parse(body)
    except BadBody as exc:
        return _json(rpc_error(None, PARSE_ERROR, f"parse error: {exc.message}"), status=400)

    caller = Caller(agent=key.agent, key=key)
    header = request.headers.get(PROTOCOL_VERSION_HEADER)
    if header is not None:
        header = header.strip(" \t")
    lone_initialize = isinstance(payload, dict) and payload.get("method") == "initialize"
    alone = not isinstance(payload, list)
    if (
        header is not None
        and header not in PROTOCOL_VERSIONS
        and not lone_initialize
        and not (alone and modern.carries_meta_version(payload))
    ):
        # A version named in `_meta` is checked against the header there, so that a disagreement is a
        # header mismatch; otherwise an unknown header is the spec's UnsupportedProtocolVersion.
        id_ = payload.get("id") if isinstance(payload, dict) else None
        return _json(
            rpc_error(
                id_,
                UNSUPPORTED_PROTOCOL_VERSION,
                f"unsupported {PROTOCOL_VERSION_HEADER} "
                f"{header[:40]!r}; this server speaks {', '.join(PROTOCOL_VERSIONS)}",
                {"supported": list(modern.SUPPORTED_NEWEST_FIRST), "requested": header[:40]},
            ),
            status=400,
        )
    # Initialize negotiates in its body; every later request names its version in the header (and
    # from 2026-07-28 in its `_meta` too, checked against the header by handle_message).
    version = header if header in PROTOCOL_VERSIONS else ASSUMED_VERSION

    if not alone:
        return _batch(payload, caller, version)
    reply = handle_message(payload, caller, version, headers=request.headers)
    if reply is None:
        return HttpResponse(status=202)
    return _json(reply.body, status=reply.status)


def _batch(messages: list, caller: Caller, version: str) -> HttpResponse:
    if at_least(version, "2025-06-18"):
        return _json(
            rpc_error(
                None,
                INVALID_REQUEST,
                f"JSON-RPC batches were removed in protocol 2025-06-18; at {version} send one "
                "message per request",
            ),
            status=400,
        )
    if not messages:
        return _json(rpc_error(None, INVALID_REQUEST, "an empty batch"), status=400)
    if len(messages) > MAX_BATCH:
        return _json(
            rpc_error(None, INVALID_REQUEST, f"a batch holds at most {MAX_BATCH} messages"), status=400
        )
    replies = [
        r.body for r in (handle_message(m, caller, version, in_batch=True) for m in messages) if r is not None
    ]
    if not replies:
        return HttpResponse(status=202)  # only notifications and responses
    return _json(replies)
