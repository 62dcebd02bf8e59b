"""Every request and answer is declared once (`collections_app.schemas`, `memory_app.schemas`): each
MCP tool's input and output schemas are generated from the declarations, each API route takes and
answers declared models, the OpenAPI document publishes exactly what they declare, and every field
of a request reaches its service from every interface. A field written into one of these places by
hand, and not into the declaration, fails here."""

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
from collections_app.schemas.search import SearchIn, SearchOut, search_arguments
from collections_app.schemas.vector_stores import VectorStoreSearchIn, VectorStoresQuery
from collections_app.services.search import search_collection
from config.api import api
from memory_app.schemas import (
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
from memory_app.services import UNCHANGED, archive_episode, change_record, recall, store_memory
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
    "store": ((RecordIn, KindIn), StoredOut),
    "recall": ((RecallIn,), RecallOut),
    "list_records": ((KindIn, ListQuery), ListOut),
    "read_record": ((RecordRef,), RecordOut),
    "change_record": ((RecordRef, RecordChangeIn), ChangedOut),
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


# What a service takes beside the request an interface sends: who asks and about what (the route's
# path, the tool's `collection`), the reader the adapter resolves, and the in-process options no
# interface publishes (the benchmarks' `mode`, `max_most`, `nprobe`; the playground's `explain`).
SERVICES = {
    "search": (
        search_collection,
        search_arguments,
        {"agent", "collection", "reader", "key", "mode", "max_most", "nprobe", "explain"},
    ),
    "recall": (recall, recall_arguments, {"agent"}),
    "store_memory": (store_memory, store_arguments, {"agent"}),
    "archive_episode": (archive_episode, store_arguments, {"agent"}),
    "change_record": (change_record, change_arguments, {"agent", "kind", "id"}),
}


@pytest.mark.parametrize("name", sorted(SERVICES))
def test_every_declared_request_field_is_a_keyword_of_its_service_and_no_other_is(name):
    """The API and the MCP tool pass the request on whole (`*_arguments`), so a field declared and
    not taken by the service, or taken by the service and never declared, is a change half made."""
    service, arguments_for, beside = SERVICES[name]
    taken = set(inspect.signature(service).parameters) - beside
    assert set(arguments_for({})) == taken


def test_a_request_reaches_the_service_under_the_services_names_with_the_declared_defaults():
    body = SearchIn(
        question="leave", onBehalfOf="payer", most=3, filters={"type": "eq", "key": "a", "value": 1}
    )
    assert search_arguments(body) == {
        "question": "leave",
        "on_behalf_of": "payer",
        "most": 3,
        "around": None,
        "min_score": None,
        "max_chars": None,
        "filters": {"type": "eq", "key": "a", "value": 1},
    }
    # An MCP tool's arguments: published names, absent ones at the declared default.
    assert search_arguments({"collection": "c", "question": "leave", "reader": "r"}) == search_arguments(
        SearchIn(question="leave")
    )
    # The deprecated alias is read as the field it names.
    unfiltered = {"since": None, "until": None, "valid_at": None, "kinds": None, "tags": None}
    assert recall_arguments({"query": "deadlines", "most": 2}) == {
        "query": "deadlines",
        "most": 2,
        "max_chars": None,
        **unfiltered,
    }
    assert recall_arguments(RecallIn(question="deadlines", max_chars=900, tags=["work"])) == {
        "query": "deadlines",
        "most": RecallIn.model_fields["most"].default,
        "max_chars": 900,
        **unfiltered,
        "tags": ["work"],
    }


def test_a_change_reaches_the_service_with_only_the_fields_sent():
    """A change is a merge patch: a field sent (even as null) is passed on, one left out is UNCHANGED,
    from the API's validated body and from an MCP tool's arguments alike."""
    unchanged = dict.fromkeys(RecordChangeIn.model_fields, UNCHANGED)
    assert change_arguments({}) == unchanged
    assert change_arguments(RecordChangeIn()) == unchanged
    sent = {"tags": None, "valid_until": "2026-01-01T00:00:00Z"}
    assert change_arguments(sent) == change_arguments(RecordChangeIn(**sent)) == {**unchanged, **sent}


def test_the_openapi_document_publishes_the_vector_stores_declarations(client):
    """The OpenAI-compatible routes are plain Django views; their shapes reach the document from the
    same declarations their views validate with (`collections_app.schemas.vector_stores`)."""
    document = client.get("/api/v1/openapi.json").json()
    paths = document["paths"]

    def named(content: dict) -> str:
        return content["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]

    listing = paths["/v1/vector_stores"]["get"]
    assert [p["name"] for p in listing["parameters"]] == list(VectorStoresQuery.model_fields)
    assert named(listing["responses"]["200"]["content"]) == "VectorStoresOut"
    assert (
        named(paths["/v1/vector_stores/{store_id}"]["get"]["responses"]["200"]["content"]) == "VectorStoreOut"
    )
    searching = paths["/v1/vector_stores/{store_id}/search"]["post"]
    assert named(searching["requestBody"]["content"]) == "VectorStoreSearchIn"
    assert named(searching["responses"]["200"]["content"]) == "SearchResultsOut"
    assert named(searching["responses"]["400"]["content"]) == "OpenAIErrorOut"
    body = document["components"]["schemas"]["VectorStoreSearchIn"]
    assert set(body["properties"]) == set(VectorStoreSearchIn.model_fields)


def test_the_openapi_document_publishes_difys_retrieval_from_its_declarations(client):
    from collections_app.schemas.dify import DifyRetrievalIn

    document = client.get("/api/v1/openapi.json").json()
    retrieval = document["paths"]["/api/v1/retrieval"]["post"]
    content = retrieval["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    assert content.endswith("/DifyRetrievalIn")
    assert retrieval["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/DifyRecordsOut"
    )
    assert retrieval["responses"]["403"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/DifyErrorOut"
    )
    body = document["components"]["schemas"]["DifyRetrievalIn"]
    assert set(body["properties"]) == set(DifyRetrievalIn.model_fields)


def test_the_search_command_has_an_option_for_every_declared_request_field():
    from collections_app.management.commands.search import NOT_OPTIONS, Command

    parser = Command().create_parser("manage.py", "search")
    options = {action.dest for action in parser._actions if action.option_strings}
    assert set(SearchIn.model_fields) - set(NOT_OPTIONS) <= options
