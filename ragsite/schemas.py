"""What every request and answer of the JSON API and the MCP tools has in common, and what is
generated from their declarations.

The error shape as an OpenAPI schema, so every route declares the errors it can answer. Request
bodies are strict: a field the endpoint does not take is refused with 422 naming it (as the MCP
tools refuse an unknown argument), rather than silently ignored, so a misspelt `min_scor` never
quietly searches with the default floor. From an app's declarations (its `schemas` module): an MCP
tool's input and output schemas (`tool_input`, `json_schema_of`), a service's limits (`bounds`),
a service's keyword arguments from a request (`arguments_of`), and the key outlines the reference docs
give (`outline`).
"""

import copy
import functools
import re
import types
import typing
from collections.abc import Collection, Mapping

from ninja import Schema
from pydantic import AliasChoices, BaseModel, ConfigDict
from pydantic.fields import FieldInfo

ERROR_MEANINGS = {
    400: "The request is malformed, out of bounds, or of the wrong type.",
    401: "No valid API key: `Authorization: Bearer <key>`.",
    403: "Not allowed (a key charging an agent other than its own).",
    404: "No such object for this agent (another agent's answers the same).",
    409: "The current state forbids it (never built, a build already running, a model mismatch).",
    413: "The request body is larger than the server accepts.",
    422: "The body has fields this route does not take; the message names them.",
    429: "The agent's runaway limit (model calls per minute) was reached; see Retry-After.",
    503: "The embedder is unavailable, the store is busy with another write (code `store_busy`; "
    "see Retry-After), or this server is still loading the collection's search index (code "
    "`index_loading`; see Retry-After).",
}


class StrictSchema(Schema):
    """A request body that refuses fields it does not declare."""

    model_config = ConfigDict(extra="forbid")


class ErrorDetail(Schema):
    code: str
    message: str


class ErrorOut(Schema):
    """The one error shape: `{"error": {"code", "message"}}`."""

    error: ErrorDetail


def errors(*statuses: int) -> dict:
    """`response={200: X, **errors(400, 401)}`: the error statuses a route answers, in the one shape."""
    unknown = set(statuses) - set(ERROR_MEANINGS)
    if unknown:
        raise ValueError(f"no meaning written for {sorted(unknown)}")
    return {status: ErrorOut for status in statuses}


# Every authenticated operation with a body may answer these; each route adds its own. 503: a store busy
# with another writer's lock (SQLite) answers it on any route that writes.
COMMON_ERRORS = (400, 401, 422, 503)


def with_errors(responses: dict, *statuses: int) -> dict:
    """`responses` plus the error statuses an operation may answer, for the OpenAPI schema."""
    return {**responses, **errors(*COMMON_ERRORS, *statuses)}


# --- One declaration, every schema --------------------------------------------------------------
#
# Each app declares its requests and answers once, as pydantic models (its `schemas` module). The API
# validates and publishes them through django-ninja; the MCP tools publish the JSON Schemas generated
# here from the same models, so a field added to a declaration reaches the API, its OpenAPI document
# and the MCP tools alike.

# What a tool's input schema may not carry: annotations the argument checker does not enforce and an
# independent validator ignores too, dropped rather than published as if they were checked.
_ANNOTATIONS = frozenset({"example", "examples", "format"})


def json_schema_of(model: type[BaseModel]) -> dict:
    """``model``'s JSON Schema as an MCP tool publishes it: self-contained (every ``$ref`` replaced by
    its definition, so the schema can be nested, as `ragsite.mcp.registry.or_error` nests it) and
    without pydantic's generated titles."""
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})

    def inline(node, names_fields: bool = False):
        if isinstance(node, dict):
            if "$ref" in node:
                return inline(copy.deepcopy(definitions[node["$ref"].rsplit("/", 1)[-1]]))
            # Under "properties" the keys are field names (a field may be called "title").
            return {
                key: inline(value, key == "properties")
                for key, value in node.items()
                if names_fields or key != "title"
            }
        if isinstance(node, list):
            return [inline(item) for item in node]
        return node

    return inline(schema)


def tool_input(*models: type[BaseModel]) -> dict:
    """An MCP tool's input schema from the request models it takes, their fields in order.

    Written in the plain dialect the tools' argument checker enforces (`ragsite.mcp.registry`): a
    nullable field is ``{"type": [kind, "null"]}`` rather than pydantic's ``anyOf``. A field with
    alias choices is published under each name (the first is the field's own; the others are
    deprecated spellings, none of them required: the tool takes exactly one)."""
    properties: dict = {}
    required: list[str] = []
    for model in models:
        schema = json_schema_of(model)
        for name, field in model.model_fields.items():
            published = _published_name(name, field)
            node = _plain(schema["properties"][published])
            choices = _alias_choices(field)
            if choices:
                for alias in choices:
                    properties[alias] = dict(node)
                    if alias != choices[0]:
                        properties[alias]["description"] = f"Deprecated: the old name of `{choices[0]}`."
                continue
            properties[published] = node
            if published in schema.get("required", ()):
                required.append(published)
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


def _published_name(name: str, field: FieldInfo) -> str:
    choices = _alias_choices(field)
    if choices:
        return choices[0]
    return field.alias or name


def _alias_choices(field: FieldInfo) -> list[str]:
    alias = field.validation_alias
    if isinstance(alias, AliasChoices):
        return [str(choice) for choice in alias.choices]
    return []


def _plain(node: dict) -> dict:
    """One property's schema in the checker's dialect (see `tool_input`)."""
    node = {key: value for key, value in node.items() if key not in _ANNOTATIONS}
    if "anyOf" in node:
        options = [_plain(option) for option in node.pop("anyOf")]
        kinds = [option.pop("type") for option in options]
        if any(isinstance(kind, list) for kind in kinds):
            raise ValueError(f"a union of unions has no plain form: {kinds}")
        for option in options:
            if option.get("additionalProperties") is True:
                del option["additionalProperties"]
            for key, value in option.items():
                if node.get(key, value) != value:
                    raise ValueError(f"a union whose members differ in {key!r} has no plain form")
                node[key] = value
        node = {"type": kinds, **node}
    if node.get("default", 0) is None:
        del node["default"]  # null is what an absent argument means anyway
    if node.get("additionalProperties") is True and "properties" not in node:
        del node["additionalProperties"]
    if "properties" in node:
        node["properties"] = {name: _plain(sub) for name, sub in node["properties"].items()}
    if isinstance(node.get("items"), dict):
        node["items"] = _plain(node["items"])
    return node


@functools.cache
def bounds(model: type[BaseModel], name: str) -> tuple:
    """``(low, high)`` of a declared field: its ``ge``/``le``, or its ``min_length``/``max_length``
    (None where the declaration sets none), for a service that checks the same limits itself."""
    low = high = None
    for constraint in model.model_fields[name].metadata:
        low = getattr(constraint, "ge", getattr(constraint, "min_length", low))
        high = getattr(constraint, "le", getattr(constraint, "max_length", high))
    return low, high


def arguments_of(
    model: type[BaseModel],
    request: BaseModel | Mapping[str, typing.Any],
    *,
    renamed: Mapping[str, str] | None = None,
    left_out: Collection[str] = (),
) -> dict:
    """The service's keyword arguments for a request declared by ``model``: every declared field but
    those ``left_out`` (the adapter resolves them itself), under the service's name for it
    (``renamed``, else the field's own), with the request's value or the declared default.

    ``request`` is the API's validated body or an MCP tool's checked arguments, whose keys are the
    published names (a field with alias choices is read under whichever was sent). The adapters pass
    the request on whole this way, so a field added to the declaration reaches the service from every
    interface without an adapter naming it (tests/test_declarations.py holds the service's keywords
    to the declaration)."""
    renamed = renamed or {}
    arguments = {}
    for name, field in model.model_fields.items():
        if name in left_out:
            continue
        if isinstance(request, BaseModel):
            value = getattr(request, name)
        else:
            names = (name, _published_name(name, field), *_alias_choices(field))
            sent = [key for key in names if key in request]
            value = request[sent[0]] if sent else field.get_default(call_default_factory=True)
        arguments[renamed.get(name, name)] = value
    return arguments


def outline(model: type[BaseModel]) -> str:
    """An answer's keys as the reference docs write them, nested answers within:
    ``{"paragraphs": [{"text", …}], "floor", "judge": {"status", "model"?}}``; ``?`` marks a key
    that comes only sometimes (a field with a default)."""
    parts = []
    for name, field in model.model_fields.items():
        key = f'"{field.serialization_alias or field.alias or name}"' + ("" if field.is_required() else "?")
        nested = _nested_model(field.annotation)
        if nested is None:
            parts.append(key)
        else:
            many, inner = nested
            parts.append(f"{key}: [{outline(inner)}]" if many else f"{key}: {outline(inner)}")
    return "{" + ", ".join(parts) + "}"


def _nested_model(annotation) -> tuple[bool, type[BaseModel]] | None:
    """(is a list, the model) for ``M``, ``M | None``, ``list[M]`` or ``list[M] | None``; else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return False, annotation
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and args:
        found = _nested_model(args[0])
        return None if found is None or found[0] else (True, found[1])
    if origin in (typing.Union, types.UnionType):
        others = [arg for arg in args if arg is not type(None)]
        return _nested_model(others[0]) if len(others) == 1 else None
    return None


def field_path(model: type[BaseModel], loc: tuple, *, positions: bool = False) -> str:
    """The dotted field path of a pydantic error's location in ``model``, without the union members'
    tags it names: the field a refusal names. ``positions``: with a list item's position
    (`conditions[0].name`), as a message to a person shows it."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]" if positions else ""
            continue  # a position in a list of models: the path goes on into the item's fields
        fields = getattr(model, "model_fields", None)
        if fields is None or part not in fields:
            break
        path += ("." if path else "") + part
        model = _model_in(fields[part].annotation)
    return path


def _model_in(annotation) -> type[BaseModel] | None:
    """The model ``M``, ``M | None`` or ``list[M]`` names, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for member in getattr(annotation, "__args__", ()):
        found = _model_in(member)
        if found is not None:
            return found
    return None


def plain_view_paths(
    routes, *, tag: str, error_model: type[BaseModel], meanings: Mapping[int, str] | None = None
) -> tuple[dict, list[type[BaseModel]]]:
    """Routes served by plain Django views (not django-ninja's: another API's shapes, the OpenAI vector
    stores', Dify's) as OpenAPI paths, and the models they name, for the JSON API's document
    (`config/api.py`), from their declarations. ``routes``: ``(path, method, view, summary, asked,
    answer, statuses)``; ``meanings``: a status's meaning where it is not ERROR_MEANINGS' own."""
    meanings = {**ERROR_MEANINGS, **(meanings or {})}
    paths: dict = {}
    models: list[type[BaseModel]] = [error_model]

    def content(model: type[BaseModel]) -> dict:
        return {"application/json": {"schema": {"$ref": f"#/components/schemas/{model.__name__}"}}}

    for path, method, view, summary, asked, answer, statuses in routes:
        operation: dict = {
            "operationId": view.__name__,
            "summary": summary,
            "tags": [tag],
            "parameters": [
                {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
                for name in re.findall(r"{(\w+)}", path)
            ],
            "responses": {
                "200": {"description": "OK", "content": content(answer)},
                **{
                    str(status): {"description": meanings[status], "content": content(error_model)}
                    for status in statuses
                },
            },
        }
        if asked is not None and method == "get":
            properties = asked.model_json_schema()["properties"]
            operation["parameters"] += [
                {"name": name, "in": "query", "required": False, "schema": properties[name]}
                for name in asked.model_fields
            ]
        elif asked is not None:
            operation["requestBody"] = {"required": True, "content": content(asked)}
            models.append(asked)
        models.append(answer)
        paths.setdefault(path, {})[method] = operation
    return paths, models
