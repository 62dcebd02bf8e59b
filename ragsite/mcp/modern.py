"""The stateless revision (2026-07-28) on top of the handshake-era transport: each request's envelope.

A 2026-07-28 request carries, instead of an earlier `initialize`, its protocol version and the
client's capabilities in `params._meta`, and mirrors its method (and a tool's name or a resource's
URI) into HTTP headers so that a gateway can route on them. This module checks that envelope in the
order the specification's conformance suite expects (a malformed `_meta` first, then headers that
disagree with the body, then a version this server does not speak), decorates results as the
revision asks (`resultType`, the server's identity in `_meta`, caching hints on cacheable answers),
and answers `server/discover`. The transport (`transport.py`) decides which era a request is in.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from .protocol import (
    HEADER_MISMATCH,
    INVALID_PARAMS,
    LATEST_VERSION,
    META_CAPABILITIES,
    META_SERVER,
    META_VERSION,
    METHOD_HEADER,
    NAME_HEADER,
    PROTOCOL_VERSION_HEADER,
    PROTOCOL_VERSIONS,
    UNSUPPORTED_PROTOCOL_VERSION,
    is_modern,
)

# Newest first, as a client picks from the front.
SUPPORTED_NEWEST_FIRST = tuple(reversed(PROTOCOL_VERSIONS))
# How long a client may keep a list or discovery answer. The tool list changes only with a deploy, so
# five minutes bounds how long a client keeps an old one; a paragraph read is per agent and changes
# with any build, so it is private and never fresh.
LIST_TTL_MS = 300_000
# Methods whose answer names the request in `Mcp-Name`, and the body field it mirrors.
NAMED_BY = {"tools/call": "name", "resources/read": "uri", "prompts/get": "name"}
BASE64_OPEN, BASE64_CLOSE = "=?base64?", "?="


@dataclass(frozen=True)
class EnvelopeError(Exception):
    """A request the envelope check refuses: the JSON-RPC code, its message, its `data`, the HTTP status."""

    code: int
    message: str
    data: Any = None
    status: int = 400


def carries_meta_version(message: Any) -> bool:
    """Whether a message names its protocol version in `params._meta`, as only a 2026-era client does."""
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return isinstance(meta, dict) and META_VERSION in meta


def request_version(method: str, params: dict, headers) -> str:
    """The version a per-request envelope names, after checking the envelope; raises EnvelopeError."""
    meta = params.get("_meta")
    if not isinstance(meta, dict):
        raise EnvelopeError(
            INVALID_PARAMS,
            f"a {LATEST_VERSION} request carries params._meta with {META_VERSION} and {META_CAPABILITIES}",
        )
    version = meta.get(META_VERSION)
    if not isinstance(version, str):
        raise EnvelopeError(INVALID_PARAMS, f"params._meta needs {META_VERSION}, a string")
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        raise EnvelopeError(INVALID_PARAMS, f"params._meta needs {META_CAPABILITIES}, an object")
    header = _header(headers, PROTOCOL_VERSION_HEADER)
    if header != version:
        raise EnvelopeError(
            HEADER_MISMATCH,
            f"header mismatch: {PROTOCOL_VERSION_HEADER} "
            f"{_shown(header)} is not the body's {META_VERSION} {_shown(version)}",
        )
    if version not in PROTOCOL_VERSIONS:
        raise EnvelopeError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "unsupported protocol version",
            data={"supported": list(SUPPORTED_NEWEST_FIRST), "requested": version},
        )
    if is_modern(version):
        _check_mirrored(method, params, headers)
    return version


def _check_mirrored(method: str, params: dict, headers) -> None:
    """`Mcp-Method` must equal the body's method, and `Mcp-Name` the name or URI a call carries."""
    sent = _header(headers, METHOD_HEADER)
    if sent != method:
        raise EnvelopeError(
            HEADER_MISMATCH,
            f"header mismatch: {METHOD_HEADER} {_shown(sent)} is not the body's method {_shown(method)}",
        )
    field = NAMED_BY.get(method)
    body_value = params.get(field) if field else None
    if body_value is None:
        return
    sent = _header(headers, NAME_HEADER)
    if sent is None or _decoded(sent) != body_value:
        raise EnvelopeError(
            HEADER_MISMATCH, f"header mismatch: {NAME_HEADER} {_shown(sent)} is not the body's params.{field}"
        )


def _header(headers, name: str) -> str | None:
    value = headers.get(name)
    # RFC 9110 5.5: whitespace around a field value is not part of it.
    return None if value is None else value.strip(" \t")


def _decoded(value: str) -> str | None:
    """A header value with the `=?base64?...?=` sentinel decoded; None when the sentinel holds no
    UTF-8 Base64."""
    if not (value.startswith(BASE64_OPEN) and value.endswith(BASE64_CLOSE) and len(value) >= 11):
        return value
    try:
        return base64.b64decode(value[len(BASE64_OPEN) : -len(BASE64_CLOSE)], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _shown(value: str | None) -> str:
    return "(missing)" if value is None else repr(value[:60])


def decorate(
    result: dict, server_info: dict, *, cacheable: str | None = None, ttl_ms: int = LIST_TTL_MS
) -> dict:
    """A 2026-era result: `resultType`, the server's identity in `_meta`, and for a cacheable answer
    its scope (`public` or `private`) and freshness."""
    decorated = {"resultType": "complete", **result}
    decorated["_meta"] = {**result.get("_meta", {}), META_SERVER: server_info}
    if cacheable is not None:
        decorated["ttlMs"] = ttl_ms
        decorated["cacheScope"] = cacheable
    return decorated


def discover(capabilities: dict, server_info: dict, instructions: str) -> dict:
    """The answer to `server/discover`: every version spoken (newest first), capabilities, instructions."""
    return decorate(
        {
            "supportedVersions": list(SUPPORTED_NEWEST_FIRST),
            "capabilities": capabilities,
            "instructions": instructions,
        },
        server_info,
        cacheable="public",
    )
