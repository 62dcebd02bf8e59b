"""Recall's per-agent index: built once, kept while nothing changes, rebuilt after any write.

Every write to an agent's records or their nodes raises the agent's recall generation in the
write's own transaction; a recall reads that one number and reuses its cached index while it
has not moved, so a warm recall reads no record rows at all.
"""

import importlib

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_app import services
from memory_app.models import MEMORY, Memory, RecallGeneration, RecordNode

from .conftest import WORDS, prose

# The module, not the `recall` function the services package exports under the same name.
recall_module = importlib.import_module("memory_app.services.recall")

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _empty_cache():
    recall_module._cache.clear()
    yield
    recall_module._cache.clear()


def ids(agent, query="harbor lantern", most=50):
    return [(r["kind"], r["id"]) for r in services.recall(agent=agent, query=query, most=most)["excerpts"]]


def queries_of(function, **kwargs):
    with CaptureQueriesContext(connection) as captured:
        result = function(**kwargs)
    return result, [q["sql"] for q in captured.captured_queries]


def test_a_warm_recall_reads_one_number_and_no_record_rows(agent):
    services.store_memory(agent=agent, text="the harbor lantern was lit at dusk")
    services.recall(agent=agent, query="harbor lantern")
    result, sql = queries_of(services.recall, agent=agent, query="harbor lantern")
    assert [r["kind"] for r in result["excerpts"]] == [MEMORY]
    assert len(sql) == 1 and "memory_recall_generation" in sql[0]


def write_paths():
    def store(agent, memory):
        services.store_memory(agent=agent, text="a second harbor lantern story")

    def archive(agent, memory):
        services.archive_episode(agent=agent, text="the harbor lantern episode")

    def update(agent, memory):
        services.update_text(agent=agent, kind=MEMORY, id=memory.pk, text="nothing about boats any more")

    def delete(agent, memory):
        services.delete_record(agent=agent, kind=MEMORY, id=memory.pk)

    def orm_delete(agent, memory):  # what the admin's delete does
        Memory.objects.filter(pk=memory.pk).delete()

    def import_lines(agent, memory):
        services.import_records(
            agent=agent, lines=['{"kind": "mem", "text": "imported harbor lantern note"}']
        )

    return [store, archive, update, delete, orm_delete, import_lines]


@pytest.mark.parametrize("write", write_paths(), ids=lambda f: f.__name__)
def test_every_write_is_seen_by_the_next_recall(agent, write):
    memory, _ = services.store_memory(agent=agent, text="the harbor lantern was lit at dusk")
    before = ids(agent)
    generation = RecallGeneration.objects.get(agent=agent).generation
    write(agent, memory)
    assert RecallGeneration.objects.get(agent=agent).generation > generation
    after = ids(agent)
    # Compare with what a recall over a cold cache (every row read again) answers.
    recall_module._cache.clear()
    assert after == ids(agent) and after != before


@pytest.mark.parametrize("write", write_paths()[:-1], ids=lambda f: f.__name__)
def test_a_write_that_names_its_record_updates_the_cached_index_in_place(agent, write, run_on_commit):
    """Rebuilding 100,000 records after each write took seconds; the named record is re-read alone."""
    memory, _ = run_on_commit(services.store_memory, agent=agent, text="the harbor lantern was lit at dusk")
    for n in range(30):
        run_on_commit(services.store_memory, agent=agent, text=f"note {n} about the copper signal")
    ids(agent)
    cached = recall_module._cache[agent.pk]
    write(agent, memory)
    after, sql = queries_of(ids, agent=agent)
    assert recall_module._cache[agent.pk] is cached
    # The generation, its recent changes, then the named record (and its nodes and passages) per kind.
    assert not any("copper" in q for q in sql) and len(sql) <= 8
    recall_module._cache.clear()
    assert after == ids(agent)


def test_a_write_that_names_nothing_reads_everything_again(agent):
    services.store_memory(agent=agent, text="the harbor lantern was lit at dusk")
    ids(agent)
    cached = recall_module._cache[agent.pk]
    services.import_records(agent=agent, lines=['{"kind": "mem", "text": "imported harbor lantern note"}'])
    assert len(ids(agent)) == 2 and recall_module._cache[agent.pk] is not cached


def test_an_index_too_many_generations_behind_reads_everything_again(agent):
    from memory_app.services.common import RECENT_GENERATIONS

    services.store_memory(agent=agent, text="the harbor lantern was lit at dusk")
    ids(agent)
    cached = recall_module._cache[agent.pk]
    for n in range(RECENT_GENERATIONS + 1):
        services.store_memory(agent=agent, text=f"harbor note {n}")
    assert len(RecallGeneration.objects.get(agent=agent).recent) == RECENT_GENERATIONS
    after = ids(agent)
    assert (
        recall_module._cache[agent.pk] is not cached
        and recall_module._cache[agent.pk].size == RECENT_GENERATIONS + 2
    )
    recall_module._cache.clear()
    assert after == ids(agent)


def test_updated_in_place_scores_what_a_fresh_index_scores(agent, run_on_commit, monkeypatch):
    """Stores, edits, deletes and node builds, with recalls between them: every answer, scores
    included, equals a cold index's, across compactions of the postings."""
    monkeypatch.setattr("memory_app.recall_index.COMPACT_AT", 50)
    rng = np.random.default_rng(3)
    live = []
    for step in range(60):
        action = rng.integers(0, 4) if live else 0
        if action <= 1:
            store = services.store_memory if step % 3 else services.archive_episode
            live.append(
                run_on_commit(store, agent=agent, text=prose(int(rng.integers(5, 150)), seed=step))[0]
            )
        elif action == 2:
            record = live[int(rng.integers(len(live)))]
            run_on_commit(
                services.update_text,
                agent=agent,
                kind=record.KIND,
                id=record.pk,
                text=prose(int(rng.integers(5, 150)), seed=1000 + step),
            )
        else:
            record = live.pop(int(rng.integers(len(live))))
            services.delete_record(agent=agent, kind=record.KIND, id=record.pk)
        if step % 4 == 0:
            query = " ".join(rng.choice(WORDS, 3))
            warm = services.recall(agent=agent, query=query, most=10)
            kept = recall_module._cache.pop(agent.pk)
            assert services.recall(agent=agent, query=query, most=10) == warm, step
            recall_module._cache[agent.pk] = kept  # the updated-in-place index goes on being updated


def test_built_nodes_are_seen_by_the_next_recall(agent):
    memory, nodes = services.store_memory(
        agent=agent, text=prose(300, seed=4) + "\n\nThe albatross xylophone."
    )
    assert nodes == {"status": "queued"}
    RecordNode.objects.filter(parent_kind=MEMORY, parent_id=memory.pk).delete()  # as if not built yet
    recall_module._cache.clear()
    (first,) = services.recall(agent=agent, query="albatross xylophone")["excerpts"]
    assert first["nodes"] == "pending" and first["start"] == 0  # no nodes yet: quoted by its opening
    assert services.build_nodes(MEMORY, memory.pk).status == "built"
    again = services.recall(agent=agent, query="albatross xylophone")["excerpts"][0]
    assert isinstance(again["nodes"], dict) and "albatross xylophone" in again["text"]


def test_another_agents_writes_leave_this_agents_index_in_place(agent, other_agent):
    services.store_memory(agent=agent, text="the harbor lantern was lit at dusk")
    services.recall(agent=agent, query="harbor lantern")
    cached = recall_module._cache[agent.pk]
    services.store_memory(agent=other_agent, text="their own harbor lantern")
    _result, sql = queries_of(services.recall, agent=agent, query="harbor lantern")
    assert len(sql) == 1 and recall_module._cache[agent.pk] is cached
    assert ids(other_agent) and ids(agent) != ids(other_agent)


def test_a_change_of_embedding_model_rebuilds_the_index(agent, embedder, monkeypatch):
    services.store_memory(agent=agent, text="the harbor lantern was lit at dusk")
    services.recall(agent=agent, query="harbor lantern")
    monkeypatch.setattr(embedder, "model", "another-model")
    (hit,) = services.recall(agent=agent, query="harbor lantern")["excerpts"]
    assert recall_module._cache[agent.pk].model == "another-model"
    assert not recall_module._cache[agent.pk].index.has_vectors  # the stored vectors are of the old model
    assert hit["id"]  # still found, lexically


def test_deleting_an_agent_with_a_cached_index_deletes_everything(agent):
    services.store_memory(agent=agent, text="the harbor lantern was lit at dusk")
    services.recall(agent=agent, query="harbor lantern")
    agent.delete()
    assert not Memory.objects.exists() and not RecallGeneration.objects.exists()


def test_the_cache_keeps_a_bounded_number_of_agents(agent, monkeypatch):
    from collections_app.services.agents import create_agent

    monkeypatch.setattr(recall_module, "CACHED_AGENTS", 3)
    agents = [agent] + [create_agent(agent_id=f"a{i}")[0] for i in range(4)]
    for each in agents:
        services.store_memory(agent=each, text="the harbor lantern was lit at dusk")
        services.recall(agent=each, query="harbor lantern")
    assert list(recall_module._cache) == [a.pk for a in agents[-3:]]


def test_cached_and_uncached_recall_agree_on_a_mixed_store(agent, run_on_commit):
    rng = np.random.default_rng(1)
    for n in range(40):
        words = int(rng.integers(8, 400))
        kind = services.store_memory if n % 3 else services.archive_episode
        run_on_commit(kind, agent=agent, text=prose(words, seed=n))
    for query in ("harbor lantern", "copper signal orchard", "nebula juniper summit"):
        warm = services.recall(agent=agent, query=query, most=10)
        recall_module._cache.clear()
        assert services.recall(agent=agent, query=query, most=10) == warm
