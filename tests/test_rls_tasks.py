"""Row-level security for django-q tasks on PostgreSQL: a task acting for one agent (a build, the
known-answers measurement, a measure job, node building, each record of the scheduled repair) runs
in that agent's scope for all its transactions, so a query in it that forgets its agent filter sees
that agent's rows only; the connection is the owner again when the task ends, also when it fails.

The tasks are called as the worker calls them (the adapters in `*/tasks.py`), outside any test
transaction, so the scope is the session-level one a real worker gets."""

import pytest
from django.db import connection

from collections_app import tasks as collection_tasks
from collections_app.models import Collection, Paragraph
from collections_app.services import builds, known_answers, leases, measure
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection, request_build
from collections_app.services.builds import commit as build_commit
from memory_app import tasks as memory_tasks
from memory_app.models import MEMORY, Memory, RecordNode
from memory_app.services import nodes as node_services
from memory_app.services import store_memory
from ragsite.rls import current_task_agent, installed, task_scope

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

NOTES = {
    "a.md": (
        "# Leave\n\nAnnual leave carries over, capped at five days.\n\n"
        "# Travel\n\nMileage is 0.42 per kilometre."
    )
}
# Long enough to need nodes under the hash embedder's 256-token window.
LONG = " ".join(f"word{i % 97} sentence{i}." for i in range(400))


def unfiltered() -> dict[str, set[str]]:
    """What a query that forgot its agent filter sees, table by table."""
    return {
        "paragraphs": set(Paragraph.objects.values_list("agent_id", flat=True)),
        "collections": set(Collection.objects.values_list("agent__agent_id", flat=True)),
        "memories": set(Memory.objects.values_list("agent__agent_id", flat=True)),
    }


EVERYONE = {
    "paragraphs": {"agent-a", "agent-b"},
    "collections": {"agent-a", "agent-b"},
    "memories": {"agent-a", "agent-b"},
}
ONLY_B = {"paragraphs": {"agent-b"}, "collections": {"agent-b"}, "memories": {"agent-b"}}


@pytest.fixture
def two_agents(knowledge_folder, settings):
    if connection.vendor != "postgresql":
        pytest.skip("row-level security is PostgreSQL's")
    assert installed(connection), "the migrations did not install row-level security"
    settings.EMBED_BACKEND = "hash"
    collections = {}
    for name in ("agent-a", "agent-b"):
        agent, _raw = create_agent(agent_id=name)
        knowledge_folder(f"{name}-docs", NOTES, agent=name)
        collections[name] = create_collection(agent=agent, name=f"{name}-docs", method="fixed", size=80)
        build_collection(collection=collections[name])
        store_memory(agent=agent, text=f"{name} remembers its own vault code.")
    assert unfiltered() == EVERYONE  # the owner, outside any scope
    return collections


def peeking(monkeypatch, module, name, seen):
    """Replace `module.name` by a wrapper that records what an unfiltered query sees, then calls it."""
    real = getattr(module, name)

    def wrapper(*args, **kwargs):
        seen.append(unfiltered())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


def test_a_build_task_sees_only_its_agents_rows_in_every_transaction(two_agents, monkeypatch):
    seen, beats = [], []
    peeking(monkeypatch, builds, "_review", seen)  # the slow part, between progress updates
    peeking(monkeypatch, build_commit, "check_lease", seen)  # inside the committing transaction, rows locked
    real_beat = leases.Heartbeat._beat_until_stopped

    def beat(self):  # the heartbeat thread's own connection
        beats.append((current_task_agent(), unfiltered()))
        return real_beat(self)

    monkeypatch.setattr(leases.Heartbeat, "_beat_until_stopped", beat)
    run = request_build(collection=two_agents["agent-b"], enqueue=False)

    assert collection_tasks.run_build(run.pk) == "succeeded"
    assert seen == [ONLY_B, ONLY_B]
    assert beats == [("agent-b", ONLY_B)]
    assert unfiltered() == EVERYONE  # the connection is the owner again for the next task
    assert current_task_agent() is None
    # What the build wrote under the scope is there for its own agent, and A's is untouched.
    assert (
        Paragraph.objects.filter(agent_id="agent-b").exists()
        and Paragraph.objects.filter(agent_id="agent-a").exists()
    )


def test_the_known_answers_task_and_a_measure_job_run_in_their_agents_scope(two_agents, monkeypatch):
    collection = two_agents["agent-b"]
    known_answers.set_known_answers(
        collection=collection,
        items=[{"question": "how many days of leave carry over", "answer": "capped at five days"}],
    )
    built = collection.runs.order_by("-pk").first()
    seen = []
    peeking(monkeypatch, known_answers, "measure_build", seen)
    peeking(monkeypatch, measure, "measure_collection", seen)
    assert collection_tasks.measure_known_answers(built.pk) == "measured"
    job = measure.request_measure(
        collection=collection,
        enqueue=False,
        questions=[{"question": "what is mileage reimbursed at", "answer": "0.42 per kilometre"}],
    )
    assert collection_tasks.run_measure(job.pk) == "succeeded"
    assert seen == [ONLY_B, ONLY_B]
    assert unfiltered() == EVERYONE


def test_node_building_runs_in_the_records_agents_scope(two_agents, monkeypatch):
    b = Memory.objects.get(agent__agent_id="agent-b")
    Memory.objects.filter(pk=b.pk).update(text=LONG)
    seen = []
    peeking(monkeypatch, node_services, "divide_record", seen)
    assert memory_tasks.build_record_nodes(MEMORY, b.pk)["status"] == "built"
    assert seen == [ONLY_B]
    assert RecordNode.objects.filter(parent_id=b.pk).exists()
    assert unfiltered() == EVERYONE


def test_the_scheduled_repair_builds_each_record_in_its_own_agents_scope(two_agents, monkeypatch):
    Memory.objects.update(text=LONG)  # both agents' memories now need nodes, and have none
    RecordNode.objects.all().delete()
    seen = []
    peeking(monkeypatch, node_services, "divide_record", seen)
    summary = memory_tasks.repair_record_nodes()
    assert summary["repaired"] == 2
    only_a = {table: {"agent-a"} for table in ONLY_B}
    assert sorted(seen, key=str) == sorted([only_a, ONLY_B], key=str)
    assert unfiltered() == EVERYONE


def test_a_task_that_fails_gives_the_connection_back(two_agents, monkeypatch):
    run = request_build(collection=two_agents["agent-b"], enqueue=False)

    def crash(build_id):
        assert unfiltered() == ONLY_B
        raise RuntimeError("the worker's task failed")

    monkeypatch.setattr(builds, "run_build", crash)
    with pytest.raises(RuntimeError):
        collection_tasks.run_build(run.pk)
    assert unfiltered() == EVERYONE and current_task_agent() is None


def test_a_connection_opened_again_mid_task_keeps_the_scope(two_agents):
    with task_scope("agent-b"):
        connection.close()  # a dropped connection; Django opens a new one at the next query
        assert unfiltered() == ONLY_B
    assert unfiltered() == EVERYONE


def test_a_task_whose_row_is_gone_sees_nothing(two_agents, monkeypatch):
    seen = []
    peeking(monkeypatch, node_services, "build_nodes", seen)
    assert memory_tasks.build_record_nodes(MEMORY, 10**9)["status"] == "gone"
    assert seen == [{"paragraphs": set(), "collections": set(), "memories": set()}]
