"""Row-level security on PostgreSQL: a query that forgets its agent filter returns only the scoped
agent's rows, or nothing, never another agent's; writes for another agent are refused; outside a
scope (migrations, the admin, commands, builds) everything is visible. SQLite has no row-level
security: these tests run when DATABASE_URL is PostgreSQL."""

import json

import pytest
from django.db import DatabaseError, connection, transaction

from collections_app.models import (
    BuildRun,
    Collection,
    CollectionBuilt,
    CollectionSync,
    Document,
    IndexChunk,
    IndexFile,
    KeptLabels,
    KnownAnswer,
    KnownAnswersReport,
    MeasureRun,
    ModelCall,
    Paragraph,
    Webhook,
    WebhookDelivery,
)
from collections_app.services import known_answers
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from collections_app.services.ledger import record_call
from collections_app.services.measure import request_measure
from memory_app.models import Memory, NodePassages, RecordNode
from memory_app.services import store_memory
from ragsite.rls import agent_scope, installed

pytestmark = [pytest.mark.postgres, pytest.mark.django_db]


@pytest.fixture
def two_agents(knowledge_folder):
    if connection.vendor != "postgresql":
        pytest.skip("row-level security is PostgreSQL's")
    assert installed(connection), "the migrations did not install row-level security"
    agents = {}
    COLLECTION_OF.clear()
    for name in ("agent-a", "agent-b"):
        agent, raw = create_agent(agent_id=name)
        knowledge_folder(
            f"{name}-docs", {"a.md": f"# Notes\n\n{name} keeps its own private notes here."}, agent=name
        )
        collection = create_collection(agent=agent, name=f"{name}-docs")
        COLLECTION_OF[name] = collection.pk
        known_answers.set_known_answers(
            collection=collection, items=[{"question": f"what does {name} keep", "answer": "private notes"}]
        )
        built = build_collection(collection=collection)
        assert known_answers.measure_build(build_id=built.pk) is not None  # the task's work, here inline
        request_measure(
            collection=collection, questions=[{"question": "notes", "answer": "notes"}], enqueue=False
        )
        store_memory(agent=agent, text=f"{name} remembers its own vault code.")
        record_call(agent=agent, collection=collection, purpose=ModelCall.EMBED, model="m", tokens_in=3)
        CollectionSync.objects.create(collection=collection, enabled=True, every=5)
        KeptLabels.objects.create(collection=collection, name="gone.md")
        hook = Webhook.objects.create(agent=agent, url="https://93.184.216.34/", events=["build.failed"])
        WEBHOOK_OF[name] = hook.pk
        WebhookDelivery.objects.create(webhook=hook, event="build.failed", payload={})
        agents[name] = (agent, raw)
    return agents


UNFILTERED = {
    "paragraphs": lambda: set(Paragraph.objects.values_list("agent_id", flat=True)),
    "collections": lambda: set(Collection.objects.values_list("agent__agent_id", flat=True)),
    "documents": lambda: set(Document.objects.values_list("collection__agent__agent_id", flat=True)),
    "built": lambda: set(CollectionBuilt.objects.values_list("agent_id", flat=True)),
    # A build's stored index files and their chunks (services.indexes.store), by their own agent_id.
    "index files": lambda: set(IndexFile.objects.values_list("agent_id", flat=True)),
    "index chunks": lambda: set(IndexChunk.objects.values_list("agent_id", flat=True)),
    "ledger": lambda: set(ModelCall.objects.values_list("agent__agent_id", flat=True)),
    "memories": lambda: set(Memory.objects.values_list("agent__agent_id", flat=True)),
    # By the row's own collection id, never a join: a join through the collection would be
    # filtered by the collection's policy and hide a table that has none.
    "build runs": lambda: owners(BuildRun),
    "measure runs": lambda: owners(MeasureRun),
    "known answers": lambda: owners(KnownAnswer),
    "known-answer reports": lambda: owners(KnownAnswersReport),
    "folder syncs": lambda: owners(CollectionSync),
    "kept labels": lambda: owners(KeptLabels),
    "webhooks": lambda: set(Webhook.objects.values_list("agent__agent_id", flat=True)),
    "webhook deliveries": lambda: {
        agent
        for agent, pk in WEBHOOK_OF.items()
        if pk in set(WebhookDelivery.objects.order_by().values_list("webhook_id", flat=True))
    },
}


def owners(model) -> set[str]:
    ids = set(model.objects.order_by().values_list("collection_id", flat=True))  # no ordering join either
    return {agent for agent, pk in COLLECTION_OF.items() if pk in ids}


COLLECTION_OF: dict[str, int] = {}  # "agent-a" -> its collection's id, filled by the fixture as the owner
WEBHOOK_OF: dict[str, int] = {}  # "agent-a" -> its webhook's id, likewise


@pytest.mark.parametrize("table", UNFILTERED)
def test_an_unfiltered_query_sees_only_the_scoped_agent(two_agents, table):
    everything = UNFILTERED[table]()
    assert everything == {"agent-a", "agent-b"}  # the owner, outside any scope, sees both
    with agent_scope("agent-b"):
        assert UNFILTERED[table]() == {"agent-b"}
    with agent_scope("nobody-at-all"):
        assert UNFILTERED[table]() == set()
    assert UNFILTERED[table]() == everything  # the role is given back after the scope


def test_record_nodes_follow_their_records(two_agents):
    a = Memory.objects.get(agent__agent_id="agent-a")
    RecordNode.objects.create(
        parent_kind="mem", parent_id=a.pk, node_index=0, start_char=0, end_char=5, token_count=2, window=8
    )
    NodePassages.objects.create(parent_kind="mem", parent_id=a.pk, node_index=0, bounds=b"\0" * 8)
    with agent_scope("agent-b"):
        assert not RecordNode.objects.exists()
        assert not NodePassages.objects.exists()
    with agent_scope("agent-a"):
        assert RecordNode.objects.count() == 1
        assert NodePassages.objects.count() == 1


def test_writing_a_row_for_another_agent_is_refused(two_agents):
    a, _raw = two_agents["agent-a"]
    with pytest.raises(DatabaseError, match="row-level security"):
        with transaction.atomic(), agent_scope("agent-b"):
            Memory.objects.create(agent=a, text="planted in A's memory by B")
    assert not Memory.objects.filter(text__startswith="planted").exists()


def test_requests_run_in_their_agents_scope_and_still_answer(client, two_agents):
    _b, raw = two_agents["agent-b"]
    headers = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    search = client.post(
        "/api/v1/collections/agent-b-docs/search",
        json.dumps({"question": "private notes", "min_score": 0}),
        content_type="application/json",
        **headers,
    )
    assert search.status_code == 200 and "agent-b keeps" in search.json()["paragraphs"][0]["text"]
    theirs = client.post(
        "/api/v1/collections/agent-a-docs/search",
        json.dumps({"question": "notes"}),
        content_type="application/json",
        **headers,
    )
    assert theirs.status_code == 404
    stored = client.post(
        "/api/v1/memory/memories",
        json.dumps({"text": "B's second memory"}),
        content_type="application/json",
        **headers,
    )
    recalled = client.post(
        "/api/v1/memory/recall",
        json.dumps({"query": "vault code"}),
        content_type="application/json",
        **headers,
    )
    assert stored.status_code == 201 and recalled.status_code == 200
    assert "agent-a" not in recalled.content.decode()
    # After the request the test's connection is the owner again.
    assert UNFILTERED["memories"]() == {"agent-a", "agent-b"}


def test_a_kept_connection_carries_no_agents_scope_into_the_next_request(client, two_agents):
    """Server threads keep their PostgreSQL connection between requests (CONN_MAX_AGE): the scope is
    `SET LOCAL`, so each request on the same connection sees its own agent's rows and no other."""
    from django.conf import settings

    assert settings.DATABASES["default"]["CONN_MAX_AGE"] > 0
    assert settings.DATABASES["default"]["CONN_HEALTH_CHECKS"]
    for name, other in (("agent-a", "agent-b"), ("agent-b", "agent-a"), ("agent-a", "agent-b")):
        recalled = client.post(
            "/api/v1/memory/recall",
            json.dumps({"question": "vault code"}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {two_agents[name][1]}",
        )
        assert recalled.status_code == 200
        texts = [excerpt["text"] for excerpt in recalled.json()["excerpts"]]
        assert texts == [f"{name} remembers its own vault code."], texts
        assert other not in recalled.content.decode()
        with connection.cursor() as cursor:
            cursor.execute("SELECT current_user = session_user, current_setting('ragsite.agent_id', true)")
            assert cursor.fetchone() in ((True, ""), (True, None))
