"""The MCP endpoint at /mcp: Streamable HTTP, stateless, answered with JSON from a plain Django view.

Why not the official SDK's server: it is an ASGI (Starlette) application whose session manager
needs a task group opened by the ASGI lifespan, which neither a WSGI deployment (gunicorn sync
workers) nor Django's own ASGI handler provides. The transport itself allows what this server
needs and nothing more: each POST carries one JSON-RPC message (or, at protocol 2025-03-26, a
batch) and is answered with `Content-Type: application/json`; notifications get 202; there is no
session and no server-initiated stream, so GET and DELETE answer 405. docs/mcp.md has the rest.

Every request is authenticated by an agent key (`Authorization: Bearer <key>`), like the JSON
API. The tools are thin adapters over the services; a service's `RagsiteError` comes back as a
tool result with `isError: true` (MCP treats tool failures as results, not protocol errors).
Nothing here logs an argument, a question or a paragraph.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
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

from .protocol import (
    ASSUMED_VERSION,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LATEST_VERSION,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    PROTOCOL_VERSION_HEADER,
    PROTOCOL_VERSIONS,
    SERVER_NAME,
    at_least,
)
from .registry import TOOLS, Caller, authenticated_key, check_arguments

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
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


def initialize(params: dict, caller: Caller, version: str) -> dict:
    requested = params.get("protocolVersion")
    if not isinstance(requested, str):
        raise RpcError(INVALID_PARAMS, "initialize needs protocolVersion, a string")
    for name in ("capabilities", "clientInfo"):
        if name in params and not isinstance(params[name], dict):
            raise RpcError(INVALID_PARAMS, f"initialize: {name} must be an object")
    return {
        # The client's version when this server speaks it, else the newest this server speaks.
        "protocolVersion": requested if requested in PROTOCOL_VERSIONS else LATEST_VERSION,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": SERVER_NAME, "version": _server_version()},
        "instructions": INSTRUCTIONS,
    }


def ping(params: dict, caller: Caller, version: str) -> dict:
    return {}


def list_tools(params: dict, caller: Caller, version: str) -> dict:
    if params.get("cursor") is not None:
        # Every tool fits on the first page, so no cursor this server could have issued exists.
        raise RpcError(INVALID_PARAMS, "invalid cursor: the tool list has one page")
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
            answer = tool.handler(caller, check_arguments(tool.input_schema, arguments))
        except DatabaseError as exc:  # a locked store is a tool error asking to retry, not an internal one
            busy = store_busy(exc)
            if busy is None:
                raise
            raise busy from None
    except RagsiteError as exc:
        logger.info("mcp tool %s for %s: %s", name, caller.agent.agent_id, exc.code)
        return tool_result(error_body(exc.code, exc.message), version, is_error=True)
    logger.info("mcp tool %s for %s: ok", name, caller.agent.agent_id)
    return tool_result(answer, version)


def tool_result(payload: dict, version: str, *, is_error: bool = False) -> dict:
    """A tools/call result: the JSON as text for every client, and as `structuredContent` from 2025-06-18."""
    result = {
        "content": [{"type": "text", "text": json.dumps(payload, ensure_ascii=False, default=str)}],
        "isError": is_error,
    }
    if at_least(version, "2025-06-18"):
        result["structuredContent"] = payload
    return result


METHODS: dict[str, Callable[[dict, Caller, str], dict]] = {
    "initialize": initialize,
    "ping": ping,
    "tools/list": list_tools,
    "tools/call": call_tool,
}


# --- One JSON-RPC message ---------------------------------------------------------------------


def _valid_id(value: Any) -> bool:
    # MCP: "Requests MUST include a string or integer ID", never null.
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def rpc_error(id_: Any, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": id_ if _valid_id(id_) else None, "error": {"code": code, "message": message}}


def handle_message(message: Any, caller: Caller, version: str, *, in_batch: bool = False) -> dict | None:
    """The reply to one JSON-RPC message, or None when it needs none (a notification, a response)."""
    if not isinstance(message, dict):
        return rpc_error(None, INVALID_REQUEST, "a JSON-RPC message is an object")
    id_ = message.get("id")
    if message.get("jsonrpc") != "2.0":
        return rpc_error(id_, INVALID_REQUEST, 'jsonrpc must be "2.0"')
    if "method" not in message:
        if "id" in message and ("result" in message or "error" in message):
            return None  # a response to a request of ours; this server sends none, so nothing waits for it
        return rpc_error(id_, INVALID_REQUEST, "a request needs a method")
    method = message["method"]
    if not isinstance(method, str):
        return rpc_error(id_, INVALID_REQUEST, "method must be a string")
    is_request = "id" in message
    if is_request and not _valid_id(id_):
        return rpc_error(None, INVALID_REQUEST, "id must be a string or an integer")
    params = message.get("params")
    if not is_request:
        # notifications/initialized, notifications/cancelled, ...: a stateless server keeps nothing
        # to update, and a notification is never answered, not even with an error.
        return None
    if params is None:
        params = {}
    elif isinstance(params, list):
        return rpc_error(id_, INVALID_PARAMS, "params must be an object (MCP uses named parameters)")
    elif not isinstance(params, dict):
        return rpc_error(id_, INVALID_REQUEST, "params must be an object")
    handler = METHODS.get(method)
    if handler is None:
        return rpc_error(id_, METHOD_NOT_FOUND, f"method not found: {method[:100]}")
    if method == "initialize" and in_batch:
        return rpc_error(id_, INVALID_REQUEST, "initialize must not be part of a batch")
    try:
        result = handler(params, caller, version)
    except RpcError as exc:
        return rpc_error(id_, exc.code, exc.message)
    except Exception as exc:
        # The exception's text may quote input; log its type, not its arguments.
        logger.error("mcp %s failed with %s", method, type(exc).__name__, exc_info=exc)
        return rpc_error(id_, INTERNAL_ERROR, "the server failed to answer this request")
    return {"jsonrpc": "2.0", "id": id_, "result": result}


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
            405, "method_not_allowed",
            "this MCP endpoint is stateless: POST JSON-RPC messages; it opens no stream (GET) and has no session to end (DELETE)",
            headers={"Allow": "POST"},
        )
    if not origin_allowed(request.headers.get("Origin")):
        return _refuse(403, "forbidden_origin", "requests from this Origin are not accepted")
    key = authenticated_key(request)
    if key is None:
        return _refuse(
            401, "unauthorized", "a valid API key is required: Authorization: Bearer <key>",
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
    lone_initialize = isinstance(payload, dict) and payload.get("method") == "initialize"
    if header is not None and header not in PROTOCOL_VERSIONS and not lone_initialize:
        return _json(rpc_error(None, INVALID_REQUEST,
                               f"unsupported {PROTOCOL_VERSION_HEADER} {header[:40]!r}; this server speaks "
                               f"{', '.join(PROTOCOL_VERSIONS)}"), status=400)
    # Initialize negotiates in its body; every later request names its version in the header.
    version = header if header in PROTOCOL_VERSIONS else ASSUMED_VERSION

    if isinstance(payload, list):
        return _batch(payload, caller, version)
    reply = handle_message(payload, caller, version)
    if reply is None:
        return HttpResponse(status=202)
    envelope_broken = reply.get("error", {}).get("code") == INVALID_REQUEST
    return _json(reply, status=400 if envelope_broken else 200)


def _batch(messages: list, caller: Caller, version: str) -> HttpResponse:
    if at_least(version, "2025-06-18"):
        return _json(rpc_error(None, INVALID_REQUEST,
                               f"JSON-RPC batches were removed in protocol 2025-06-18; at {version} send one "
                               "message per request"), status=400)
    if not messages:
        return _json(rpc_error(None, INVALID_REQUEST, "an empty batch"), status=400)
    if len(messages) > MAX_BATCH:
        return _json(rpc_error(None, INVALID_REQUEST, f"a batch holds at most {MAX_BATCH} messages"), status=400)
    replies = [r for r in (handle_message(m, caller, version, in_batch=True) for m in messages) if r is not None]
    if not replies:
        return HttpResponse(status=202)  # only notifications and responses
    return _json(replies)
