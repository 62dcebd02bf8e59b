"""The read audit: every route and MCP tool or resource that answers text leaves exactly one entry.

The routes are listed from the routers themselves (the ninja API, config/urls.py, the MCP tool and
resource registries), and each must be classified below, either as a read with a call that makes
one or as not a read with the reason; a new endpoint fails `test_every_route_is_classified` until
somebody says which it is.
"""

import json

import pytest

from collections_app.mcp_citations import cited_uri
from collections_app.models import ReadAudit
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from memory_app.services.records import archive_episode, store_memory
from ragsite.mcp import RESOURCES, TOOLS
from tests.collections.test_mcp import call, call_tool
from tests.conftest import HANDBOOK

QUESTION = "how many days of annual leave carry over"
MEMORY = "The user prefers short answers and meets the auditors on Tuesdays."


@pytest.fixture
def world(db, knowledge_folder):
    """An agent with a key, its built handbook, one memory and one episode."""
    agent, raw = create_agent(agent_id="alpha", name="Alpha")
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK)
    assert build_collection(collection=collection).status == "succeeded"
    memory, _nodes = store_memory(agent=agent, text=MEMORY)
    archive_episode(agent=agent, text="We reviewed the audit plan with the user.")
    return {"agent": agent, "raw": raw, "key": agent.keys.get(), "memory": memory}


def _bearer(world) -> dict:
    return {"Authorization": f"Bearer {world['raw']}"}


def _api_get(path):
    return lambda client, world: client.get(path.format(**world), headers=_bearer(world))


def _api_post(path, body):
    return lambda client, world: client.post(
        path.format(**world), data=json.dumps(body), content_type="application/json", headers=_bearer(world)
    )


def _tool(name, arguments):
    def make(client, world):
        result = call_tool(
            client,
            world["raw"],
            name,
            {k: v.format(**world) if isinstance(v, str) else v for k, v in arguments.items()},
        )
        assert result["isError"] is False, result
        return result

    return make


def _paragraph_resource(client, world):
    response = call(
        client, world["raw"], "resources/read", {"uri": cited_uri("handbook", "leave.md#0", None)}
    )
    assert response.status_code == 200 and "result" in response.json(), response.content
    return response


# Reads: how to make one, and the entry it must leave (kind, channel, target).
API_READS = {
    ("POST", "/api/v1/collections/{name}/search"): (
        _api_post("/api/v1/collections/handbook/search", {"question": QUESTION}),
        ("search", "api", "handbook"),
    ),
    ("GET", "/api/v1/collections/{name}/paragraph"): (
        _api_get("/api/v1/collections/handbook/paragraph?chunk_id=leave.md%230"),
        ("paragraph", "api", "handbook"),
    ),
    ("POST", "/api/v1/memory/recall"): (
        _api_post("/api/v1/memory/recall", {"question": "when are the auditors met"}),
        ("recall", "api", "mem+ep"),
    ),
    ("GET", "/api/v1/memory/records/{kind}/{id}"): (
        lambda client, world: client.get(
            f"/api/v1/memory/records/mem/{world['memory'].pk}", headers=_bearer(world)
        ),
        ("record", "api", "mem"),
    ),
    ("GET", "/api/v1/memory/memories"): (_api_get("/api/v1/memory/memories"), ("records", "api", "mem")),
    ("GET", "/api/v1/memory/episodes"): (_api_get("/api/v1/memory/episodes"), ("records", "api", "ep")),
    ("POST", "v1/vector_stores/<str:store_id>/search"): (
        _api_post("/v1/vector_stores/handbook/search", {"query": QUESTION}),
        ("vector_store_search", "openai", "handbook"),
    ),
    ("*", "api/v1/retrieval"): (
        _api_post(
            "/api/v1/retrieval",
            {
                "knowledge_id": "handbook",
                "query": QUESTION,
                "retrieval_setting": {"top_k": 2, "score_threshold": 0.0},
            },
        ),
        ("search", "dify", "handbook"),
    ),
}
MCP_READS = {
    "search": (
        _tool("search", {"collection": "handbook", "question": QUESTION}),
        ("search", "mcp", "handbook"),
    ),
    "recall": (_tool("recall", {"question": "when are the auditors met"}), ("recall", "mcp", "mem+ep")),
    "list_records": (_tool("list_records", {}), ("records", "mcp", "mem")),
    "read_record": (
        lambda client, world: _tool("read_record", {"kind": "mem", "id": world["memory"].pk})(client, world),
        ("record", "mcp", "mem"),
    ),
    "resource:ragsite://collections/": (_paragraph_resource, ("paragraph", "mcp", "handbook")),
}
# Not reads: what each answers instead of stored text.
NOT_READS = {
    ("GET", "/api/v1/collections"): "collection names and build records",
    ("POST", "/api/v1/collections"): "creates a collection",
    ("GET", "/api/v1/collections/"): "collection names and build records",
    ("POST", "/api/v1/collections/"): "creates a collection",
    ("GET", "/api/v1/collections/{name}"): "one collection's description and build record",
    ("PUT", "/api/v1/collections/{name}/sync"): "sets the sync period",
    ("PUT", "/api/v1/collections/{name}/analyzer"): "sets the analyzer; queues a rebuild",
    ("PUT", "/api/v1/collections/{name}/source"): "sets where the documents come from",
    ("POST", "/api/v1/collections/{name}/build"): "queues a build",
    (
        "GET",
        "/api/v1/collections/{name}/known-answers",
    ): "the agent's own known answers, not the store's text",
    ("PUT", "/api/v1/collections/{name}/known-answers"): "replaces the known answers",
    ("GET", "/api/v1/collections/{name}/builds/{build}"): "a build's counts and outcome",
    ("GET", "/api/v1/collections/{name}/builds"): "builds' counts and outcomes",
    ("POST", "/api/v1/memory/memories"): "stores a memory; answers its id and length",
    ("POST", "/api/v1/memory/episodes"): "stores an episode; answers its id and length",
    ("GET", "/api/v1/memory/nodes/{kind}/{id}/{index}"): "a node's offsets and token count, no text",
    ("PUT", "/api/v1/memory/records/{kind}/{id}"): "replaces a record's text; answers its length",
    (
        "PATCH",
        "/api/v1/memory/records/{kind}/{id}",
    ): "changes a record's tags and validity; answers them, no text",
    ("DELETE", "/api/v1/memory/records/{kind}/{id}"): "deletes a record",
    ("GET", "/api/v1/memory/health"): "counts of records without nodes",
    ("*", ""): "the home page",
    ("*", "favicon.ico"): "the site's icon, the same bytes for everyone",
    ("*", "admin/"): "staff pages (the admin)",
    ("*", "v1/embeddings"): "vectors of the caller's own input",
    ("*", "v1/tokenize"): "tokens of the caller's own input",
    ("*", "count_tokens"): "a count over the caller's own input",
    ("*", "v1/vector_stores"): "vector store names",
    ("*", "v1/vector_stores/<str:store_id>"): "one vector store's description",
    ("*", "^v1/vector_stores/(?P<rest>.*)$"): "the API's 404",
    ("*", "^api/(?P<rest>.*)$"): "the API's 404",
    ("*", "mcp"): "the MCP transport: its tools and resources are listed one by one",
    ("*", "metrics"): "counters by route pattern and outcome, no text",
    ("*", "admin/login/"): "the staff login page",
    ("*", "admin/logout/"): "ends a staff session",
    ("*", "sso/login"): "sends staff to the identity provider",
    ("*", "sso/callback"): "signs staff in from the identity provider",
    (
        "*",
        "^scim/v2/(?P<kind>Users|Groups|ServiceProviderConfig|ResourceTypes|Schemas|\\.search)$",
    ): "the identity provider provisions readers, and SCIM's discovery; no text",
    (
        "*",
        "^scim/v2/(?P<kind>Users|Groups|ResourceTypes|Schemas)/(?P<resource_id>[^/]+)$",
    ): "one provisioned reader or group, or a resource type or schema",
    ("*", "^scim/(?P<rest>.*)$"): "SCIM's 404",
    "build": "queues a build",
    "set_source": "sets where the documents come from; answers its settings, never credentials",
    "measure": "counts, ranks and scores of a scratch build, no paragraph text",
    "build_status": "a build's counts and outcome",
    "collections": "collection names and build records",
    "store": "stores a record; answers its id and length",
    "change_record": "changes a record's tags and validity; answers them, no text",
}


def _routes() -> set:
    from config import urls
    from config.api import api

    found = set()
    for prefix, router in api._routers:
        for path, path_view in router.path_operations.items():
            for operation in path_view.operations:
                for method in operation.methods:
                    found.add((method, f"/api/v1{prefix}{path}"))
    for pattern in urls.urlpatterns:
        route = str(pattern.pattern)
        if route == "api/v1/":
            continue  # its routes are the ninja API's, above
        if route == "v1/vector_stores/<str:store_id>/search":
            found.add(("POST", route))
        else:
            found.add(("*", route))
    found.update(TOOLS)
    found.update(f"resource:{prefix}" for prefix in RESOURCES)
    return found


def test_every_route_is_classified():
    classified = set(API_READS) | set(MCP_READS) | set(NOT_READS)
    routes = _routes()
    assert routes - classified == set(), "classify these: a read (with a call) or not a read (with why)"
    assert classified - routes == set(), "these are classified but no longer exist"


@pytest.mark.parametrize("route", sorted(map(str, {**API_READS, **MCP_READS})))
def test_each_read_leaves_one_entry(route, client, world):
    read, (kind, channel, target) = {str(k): v for k, v in {**API_READS, **MCP_READS}.items()}[route]
    before = ReadAudit.objects.count()
    response = read(client, world)
    assert getattr(response, "status_code", 200) == 200, response.content
    assert ReadAudit.objects.count() == before + 1
    entry = ReadAudit.objects.latest("id")
    assert (entry.kind, entry.channel, entry.target) == (kind, channel, target)
    assert (entry.agent_id, entry.key_id, entry.status) == ("alpha", world["key"].pk, 200)
    assert entry.ids and entry.size > 0
    assert not entry.question  # AUDIT_QUESTIONS=hash, the default
    if kind in ("search", "recall", "vector_store_search"):
        assert len(entry.question_sha256) == 64


def test_a_search_entry_names_what_it_quoted(client, world, settings):
    settings.AUDIT_QUESTIONS = "text"
    response = client.post(
        "/api/v1/collections/handbook/search",
        data=json.dumps({"question": QUESTION, "onBehalfOf": "alpha", "most": 3}),
        content_type="application/json",
        headers=_bearer(world),
    )
    answer = response.json()
    entry = ReadAudit.objects.get()
    assert entry.question == QUESTION and entry.on_behalf_of == "alpha"
    assert entry.ids == [cid for p in answer["paragraphs"] for cid in p["chunk_ids"]]
    assert entry.size == sum(len(p["text"]) for p in answer["paragraphs"])


def test_questions_are_hashed_or_left_out_as_configured(client, world, settings):
    import hashlib

    for mode, kept, digest in (
        ("hash", "", hashlib.sha256(QUESTION.encode()).hexdigest()),
        ("off", "", ""),
    ):
        settings.AUDIT_QUESTIONS = mode
        _api_post("/api/v1/collections/handbook/search", {"question": QUESTION})(client, world)
        entry = ReadAudit.objects.latest("id")
        assert (entry.question, entry.question_sha256) == (kept, digest)


def test_a_refused_read_is_recorded_with_its_status(client, world):
    response = _api_post("/api/v1/collections/nowhere/search", {"question": QUESTION})(client, world)
    assert response.status_code == 404
    result = call_tool(client, world["raw"], "read_record", {"kind": "mem", "id": 999999})
    assert result["isError"] is True
    entries = list(ReadAudit.objects.order_by("id").values_list("channel", "target", "status", "ids"))
    assert entries == [("api", "nowhere", 404, []), ("mcp", "mem", 404, [])]


def test_a_read_whose_entry_cannot_be_written_answers_no_text(client, world, settings):
    settings.AUDIT_QUESTIONS = "verbatim"  # not a mode: the writer refuses, so the read must fail
    response = _api_post("/api/v1/collections/handbook/search", {"question": QUESTION})(client, world)
    assert response.status_code == 500 and "paragraphs" not in response.json()
    response = call(
        client, world["raw"], "tools/call", {"name": "recall", "arguments": {"question": "auditors"}}
    )
    assert "result" not in response.json() and response.json()["error"]["code"] == -32603
    assert ReadAudit.objects.count() == 0


@pytest.mark.postgres
def test_an_agents_scope_may_write_an_entry_but_never_read_one(client, world):
    from django.db import DatabaseError, connection, transaction

    from ragsite.rls import agent_scope, installed

    if connection.vendor != "postgresql":
        pytest.skip("the agents' role is PostgreSQL's")
    assert installed(connection)
    _api_post("/api/v1/collections/handbook/search", {"question": QUESTION})(client, world)  # in its scope
    assert ReadAudit.objects.count() == 1
    for statement in (
        "SELECT question_sha256 FROM audit_reads",
        "DELETE FROM audit_reads",
        "UPDATE audit_reads SET size = 0",
    ):
        with agent_scope("alpha"), pytest.raises(DatabaseError, match="permission denied"):
            with transaction.atomic(), connection.cursor() as cursor:
                cursor.execute(statement)
