"""The MCP tool registry: what a tool is, who calls it, and the check of its arguments against its schema.

Each app registers its own tools from its `mcp_tools` module (imported by its AppConfig.ready), so
this package never imports an app. `set_authenticator` is how the app that owns agent keys tells
the transport how to turn a request into a `Caller`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ragsite.errors import RagsiteError

from .protocol import at_least

# --- Tools --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Caller:
    """Who is calling: the key's agent, and the key (it decides whom model calls may be charged to)."""

    agent: Any  # collections_app.models.Agent
    key: Any  # collections_app.models.ApiKey


@dataclass(frozen=True)
class Tool:
    """One MCP tool: its JSON Schemas and the adapter that calls a service with checked arguments."""

    name: str
    title: str
    description: str
    input_schema: dict
    handler: Callable[[Caller, dict], dict]
    output_schema: dict | None = None  # the success shape; an error shape is allowed beside it
    annotations: dict = field(default_factory=dict)
    # (arguments, answer) -> `resource_link` content items for what the answer cites (from 2025-06-18).
    links: Callable[[dict, dict], list[dict]] | None = None

    def describe(self, version: str) -> dict:
        """The tool as `tools/list` shows it to a client speaking `version`."""
        described = {"name": self.name, "description": self.description, "inputSchema": self.input_schema}
        if self.annotations:
            described["annotations"] = {"title": self.title, **self.annotations}
        if at_least(version, "2025-06-18"):
            described["title"] = self.title
            if self.output_schema is not None:
                described["outputSchema"] = or_error(self.output_schema)
        return described


# name -> Tool, filled by each app's mcp_tools module.
TOOLS: dict[str, Tool] = {}


def register(tool: Tool) -> Tool:
    TOOLS[tool.name] = tool
    return tool


@dataclass(frozen=True)
class ResourceTemplate:
    """A family of resources a tool's answer links to, read back by `resources/read`.

    `prefix` is what every URI of the family starts with; `read(caller, uri)` answers the resource's
    contents (`{"uri", "mimeType", "text"}`) or raises a RagsiteError when the caller may not see it.
    """

    uri_template: str
    prefix: str
    name: str
    title: str
    description: str
    mime_type: str
    read: Callable[[Caller, str], dict]

    def describe(self) -> dict:
        return {
            "uriTemplate": self.uri_template,
            "name": self.name,
            "title": self.title,
            "description": self.description,
            "mimeType": self.mime_type,
        }


# uri prefix -> ResourceTemplate, filled like TOOLS.
RESOURCES: dict[str, ResourceTemplate] = {}


def register_resource(template: ResourceTemplate) -> ResourceTemplate:
    RESOURCES[template.prefix] = template
    return template


def resource_for(uri: str) -> ResourceTemplate | None:
    return next((t for prefix, t in RESOURCES.items() if uri.startswith(prefix)), None)


ERROR_SCHEMA = {
    "type": "object",
    "properties": {
        "error": {
            "type": "object",
            "properties": {"code": {"type": "string"}, "message": {"type": "string"}},
            "required": ["code", "message"],
        }
    },
    "required": ["error"],
}


def or_error(schema: dict) -> dict:
    """An output schema a failed call's `structuredContent` (`{"error": {...}}`) also matches.

    Clients validate `structuredContent` against `outputSchema` even when `isError` is set (the
    TypeScript SDK does), so the published schema names both shapes.
    """
    return {"type": "object", "anyOf": [schema, ERROR_SCHEMA]}


# --- Checking arguments against a tool's input schema ---------------------------------------

# The JSON Schema keywords the tools' input schemas may use: exactly those `check_arguments` enforces
# (or, for the annotations, ignores). A test keeps the schemas inside this set.
SCHEMA_KEYWORDS = frozenset(
    {
        "type",
        "properties",
        "required",
        "additionalProperties",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "enum",
        "default",
        "description",
        "title",
        "items",
        "minItems",
        "maxItems",
    }
)


class InvalidArguments(RagsiteError):
    code = "invalid_arguments"
    status = 400


def _is_type(value: Any, kind: str) -> bool:
    if kind == "null":
        return value is None
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        # JSON Schema counts 5.0 as an integer; bool is not a number in JSON.
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    raise ValueError(f"unsupported schema type {kind!r}")


def _check_value(name: str, value: Any, schema: dict) -> Any:
    kinds = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    kind = next((k for k in kinds if _is_type(value, k)), None)
    if kind is None:
        raise InvalidArguments(f"'{name}' must be {' or '.join(kinds)}")
    if kind == "null":
        return None
    if "enum" in schema and value not in schema["enum"]:
        raise InvalidArguments(f"'{name}' must be one of {', '.join(map(str, schema['enum']))}")
    if kind == "string":
        if len(value) < schema.get("minLength", 0):
            raise InvalidArguments(f"'{name}' must be at least {schema['minLength']} character(s)")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            raise InvalidArguments(f"'{name}' must be at most {schema['maxLength']} characters")
    if kind in ("integer", "number"):
        if "minimum" in schema and value < schema["minimum"]:
            raise InvalidArguments(f"'{name}' must be at least {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise InvalidArguments(f"'{name}' must be at most {schema['maximum']}")
        return int(value) if kind == "integer" else float(value)
    if kind == "array":
        if len(value) < schema.get("minItems", 0):
            raise InvalidArguments(f"'{name}' must hold at least {schema['minItems']} item(s)")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise InvalidArguments(f"'{name}' must hold at most {schema['maxItems']} items")
        if "items" in schema:
            return [_check_item(f"{name}[{i}]", item, schema["items"]) for i, item in enumerate(value)]
    if kind == "object" and "properties" in schema:
        return _check_item(name, value, schema)
    return value


def _check_item(name: str, value: Any, schema: dict) -> Any:
    if schema.get("type") != "object":
        return _check_value(name, value, schema)
    if not isinstance(value, dict):
        raise InvalidArguments(f"'{name}' must be object")
    try:
        return check_arguments(schema, value)
    except InvalidArguments as exc:
        raise InvalidArguments(f"'{name}': {exc.message}") from None


def check_arguments(schema: dict, arguments: dict) -> dict:
    """`arguments` checked against a tool's object schema: no unknown names, the required ones
    present, each of its type and within its limits. Returns them with integers as int and
    numbers as float; raises InvalidArguments (a tool error, so the model can correct itself)."""
    properties = schema["properties"]
    unknown = sorted(set(arguments) - set(properties))
    if unknown and schema.get("additionalProperties") is False:
        names = ", ".join(repr(n[:50]) for n in unknown[:5])
        raise InvalidArguments(f"unknown argument(s) {names}; this tool takes {', '.join(properties)}")
    missing = [name for name in schema.get("required", ()) if name not in arguments]
    if missing:
        raise InvalidArguments(f"missing required argument(s) {', '.join(repr(n) for n in missing)}")
    return {name: _check_value(name, value, properties[name]) for name, value in arguments.items()}


# request -> the agent key it carries, or None; set once by the app that owns keys.
_authenticator: Callable[[Any], Any] | None = None


def set_authenticator(authenticate: Callable[[Any], Any]) -> None:
    """Install `authenticate(request) -> key or None`; a key has `.agent`."""
    global _authenticator
    _authenticator = authenticate


def authenticated_key(request) -> Any:
    """The agent key a request carries, or None (also when no authenticator was installed)."""
    return None if _authenticator is None else _authenticator(request)
