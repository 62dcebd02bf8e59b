"""Every request and answer is declared once (`collections_app.schemas`, `memory_app.schemas`): each
MCP tool's input and output schemas are generated from the declarations, each API route takes and
answers declared models, and the OpenAPI document publishes exactly what they declare. A field
written into one of these places by hand, and not into the declaration, fails here."""

import importlib
import inspect
import pkgutil
import typing

import pytest
from pydantic import BaseModel

from collections_app.schemas.builds import BuildOut, BuildStatusIn, BuildStatusOut
from collections_app.schemas.collections import (
    CollectionName,
    CollectionsOut,
    NoArguments,
    SourceIn,
    SourceOut,
)
from collections_app.schemas.measure import MeasureIn, MeasureOut
from collections_app.schemas.search import SearchIn, SearchOut
from config.api import api
from memory_app.schemas import (
    KindIn,
    ListOut,
    ListQuery,
    RecallIn,
    RecallOut,
    RecordOut,
    RecordRef,
    StoredOut,
    TextIn,
)
from ragsite.mcp import registry
from ragsite.schemas import json_schema_of, tool_input

# Each tool: the request models its arguments are (in order), and its answer.
TOOLS = {
    "search": ((CollectionName, SearchIn), SearchOut),
    "build": ((CollectionName,), BuildOut),
    "build_status": ((CollectionName, BuildStatusIn), BuildStatusOut),
    "collections": ((NoArguments,), CollectionsOut),
    "measure": ((CollectionName, MeasureIn), MeasureOut),
    "set_source": ((CollectionName, SourceIn), SourceOut),
    "store": ((TextIn, KindIn), StoredOut),
    "recall": ((RecallIn,), RecallOut),
    "list_records": ((KindIn, ListQuery), ListOut),
    "read_record": ((RecordRef,), RecordOut),
}

# Where declarations live; nothing else may define a model a route or a tool uses.
DECLARING = ("collections_app.schemas", "memory_app.schemas", "ragsite.schemas", "ragsite.model_calls.rerank")


def declared_models() -> dict[str, type[BaseModel]]:
    modules = [importlib.import_module(name) for name in DECLARING]
    package = importlib.import_module("collections_app.schemas")
    modules += [
        importlib.import_module(f"collections_app.schemas.{m.name}")
        for m in pkgutil.iter_modules(package.__path__)
    ]
    found: dict[str, type[BaseModel]] = {}
    for module in modules:
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseModel)
                and value.__module__ == module.__name__
            ):
                assert found.setdefault(value.__name__, value) is value, f"two models named {value.__name__}"
    return found


def models_in(annotation) -> list[type[BaseModel]]:
    """The pydantic models an annotation names (`X`, `list[X]`, `X | None`, `Query[X]`)."""
    if inspect.isclass(annotation) and issubclass(annotation, BaseModel):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in models_in(arg)]


def operations():
    for prefix, router in api._routers:
        for path, view in router.path_operations.items():
            for operation in view.operations:
                yield f"{prefix}{path}", operation


def test_every_tool_is_declared():
    assert set(TOOLS) == set(registry.TOOLS)


@pytest.mark.parametrize("name", sorted(TOOLS))
def test_a_tools_schemas_are_generated_from_its_declaration(name):
    arguments, answer = TOOLS[name]
    tool = registry.TOOLS[name]
    assert tool.input_schema == tool_input(*arguments)
    assert tool.output_schema == json_schema_of(answer)


def test_every_route_takes_and_answers_declared_models():
    declared = set(declared_models().values())
    seen = 0
    for path, operation in operations():
        hints = typing.get_type_hints(operation.view_func, include_extras=True)
        taken = [model for name, hint in hints.items() if name != "return" for model in models_in(hint)]
        answered = [
            model
            for wrapper in (operation.response_models or {}).values()
            if wrapper is not None
            for model in models_in(wrapper.model_fields["response"].annotation)
        ]
        for model in taken + answered:
            assert model in declared, (
                f"{path} ({operation.view_func.__name__}) uses {model.__qualname__} "
                f"of {model.__module__}, no schemas module"
            )
        seen += len(taken) + len(answered)
    assert seen > 40  # the routes were found at all


def test_the_openapi_document_publishes_exactly_the_declarations(client):
    declared = declared_models()
    components = client.get("/api/v1/openapi.json").json()["components"]["schemas"]
    for name, component in components.items():
        assert name in declared, f"OpenAPI publishes {name}, which no schemas module declares"
        published = set(component.get("properties", {}))
        assert published == set(declared[name].model_json_schema(by_alias=True).get("properties", {})), name
