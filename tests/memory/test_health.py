"""check_health: what it reports, and what its repair builds (at most `limit` per run, never the record)."""

import io

import pytest
from django.core.management import call_command

from memory_app import services
from memory_app.models import EPISODE, MEMORY, Episode, Memory, RecordNode
from memory_app.schedules import HEALTH_REPAIR, HEALTH_REPAIR_FUNC, ensure_schedules

from .conftest import prose

pytestmark = pytest.mark.django_db


def store_unbuilt(agent, count, *, kind=MEMORY, words=200):
    """Long records whose node builds were never run (as with the task queue down)."""
    store = services.store_memory if kind == MEMORY else services.archive_episode
    return [store(agent=agent, text=prose(words, seed=n))[0] for n in range(count)]


def test_a_healthy_store_reports_nothing_missing(agent, run_on_commit):
    run_on_commit(services.store_memory, agent=agent, text=prose(200))
    run_on_commit(services.store_memory, agent=agent, text="short")
    report = services.check_health()
    assert report["records"] == 2 and report["long_records"] == 1
    assert report["missing_nodes"] == report["stale_nodes"] == 0 and report["missing"] == []
    assert report["missing_triggers"] == [] and report["orphan_nodes"] == 0


def test_long_records_without_nodes_are_reported_and_short_ones_are_not(agent):
    long_ones = store_unbuilt(agent, 3) + store_unbuilt(agent, 1, kind=EPISODE)
    services.store_memory(agent=agent, text="a short memory needs no nodes")
    report = services.check_health()
    assert report["records"] == 5 and report["long_records"] == 4 and report["missing_nodes"] == 4
    assert {(item["kind"], item["id"]) for item in report["missing"]} == {(r.KIND, r.pk) for r in long_ones}
    assert {item["reason"] for item in report["missing"]} == {"missing"}
    assert "repaired" not in report  # reporting builds nothing
    assert RecordNode.objects.count() == 0


def test_the_repair_builds_at_most_limit_records_per_run_and_converges(agent):
    store_unbuilt(agent, 7)
    first = services.check_health(repair=True, limit=3)
    assert [item["status"] for item in first["repaired"]] == ["built"] * 3
    assert first["remaining"] == 4
    assert services.check_health()["missing_nodes"] == 4
    services.check_health(repair=True, limit=3)
    last = services.check_health(repair=True, limit=3)
    assert len(last["repaired"]) == 1 and last["remaining"] == 0
    assert services.check_health()["missing_nodes"] == 0


def test_the_default_limit_is_fifty(agent, monkeypatch):
    built = []
    monkeypatch.setattr(
        services.nodes,
        "build_nodes",
        lambda kind, id: built.append(id) or services.NodeBuild(kind, id, "built", 2),
    )
    store_unbuilt(agent, 52, words=45)
    report = services.check_health(repair=True)
    assert len(built) == 50 and report["remaining"] == 2


def test_the_repair_goes_oldest_first(agent):
    records = store_unbuilt(agent, 3)
    report = services.check_health(repair=True, limit=1)
    assert report["repaired"][0]["id"] == records[0].pk


def test_a_locked_record_is_repaired_without_being_modified(agent):
    (memory,) = store_unbuilt(agent, 1)
    Memory.objects.filter(pk=memory.pk).update(locked=True)
    before = Memory.objects.filter(pk=memory.pk).values().get()
    report = services.check_health(repair=True)
    assert report["repaired"] == [
        {"kind": MEMORY, "id": memory.pk, "status": "built", "nodes": report["repaired"][0]["nodes"]}
    ]
    after = Memory.objects.filter(pk=memory.pk).values().get()
    # Its text, count, times and lock are as they were; the vector its store queued is made too.
    assert before["embedding"] is None and after.pop("embedding") is not None
    before.pop("embedding")
    assert after == before and report["vectors"] == [{"kind": MEMORY, "id": memory.pk, "status": "built"}]


def test_nodes_of_another_model_count_as_missing_and_are_replaced(agent, run_on_commit, embedder):
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=prose(200))
    RecordNode.objects.update(embedding_model="retired-model")
    report = services.check_health()
    assert report["missing_nodes"] == report["stale_nodes"] == 1
    assert report["missing"] == [{"kind": MEMORY, "id": memory.pk, "reason": "stale"}]
    services.check_health(repair=True)
    assert set(RecordNode.objects.values_list("embedding_model", flat=True)) == {embedder.model}


def test_stale_nodes_of_a_record_that_now_fits_are_removed(agent):
    memory, _ = services.store_memory(agent=agent, text="short now")
    RecordNode.objects.create(
        parent_kind=MEMORY,
        parent_id=memory.pk,
        node_index=0,
        start_char=0,
        end_char=5,
        token_count=3,
        window=4,
        embedding_model="tiny-window-model",
    )
    report = services.check_health(repair=True)
    assert report["repaired"][0]["status"] == "fits"
    assert RecordNode.objects.count() == 0


def test_records_stored_by_another_model_are_counted_again(agent, run_on_commit):
    (memory,) = store_unbuilt(agent, 1)
    # Stored long ago under another model: its token count says nothing about today's window.
    Memory.objects.filter(pk=memory.pk).update(token_count=3, embedding_model="retired-model")
    assert services.check_health()["missing_nodes"] == 1


def test_the_report_is_limited_to_one_agent_when_asked(agent, other_agent):
    store_unbuilt(agent, 2)
    store_unbuilt(other_agent, 1)
    mine = services.check_health(agent=agent, repair=True)
    assert mine["records"] == 2 and len(mine["repaired"]) == 2 and "orphan_nodes" not in mine
    assert services.check_health(agent=other_agent)["missing_nodes"] == 1


def test_orphan_nodes_are_counted_and_removed_by_a_store_wide_repair(agent):
    RecordNode.objects.create(
        parent_kind=EPISODE,
        parent_id=424242,
        node_index=0,
        start_char=0,
        end_char=9,
        token_count=5,
        window=40,
    )
    assert services.check_health()["orphan_nodes"] == 1
    assert services.check_health(repair=True)["orphans_removed"] == 1
    assert RecordNode.objects.count() == 0


def test_with_no_window_nothing_can_be_divided_and_nothing_is_listed(agent, monkeypatch):
    from ragsite.embedders import NoneEmbedder

    store_unbuilt(agent, 2)
    monkeypatch.setattr("ragsite.embedding.get_embedder", lambda backend=None: NoneEmbedder())
    report = services.check_health(repair=True)
    assert report["can_divide"] is False and report["missing"] == [] and report["repaired"] == []
    assert report["unknown_length"] == 2


def test_the_scheduled_task_repairs_the_whole_store(agent):
    from memory_app.tasks import repair_record_nodes

    store_unbuilt(agent, 2)
    summary = repair_record_nodes()
    assert summary == {"missing_nodes": 2, "repaired": 2, "remaining": 0, "missing_triggers": []}


def test_the_schedule_exists_after_migrate_and_setup_is_idempotent(settings):
    from django_q.models import Schedule

    assert Schedule.objects.filter(name=HEALTH_REPAIR).count() == 1  # made by post_migrate
    assert ensure_schedules() == []
    settings.HEALTH_REPAIR_MINUTES = 7
    call_command("setup_schedules", stdout=io.StringIO())
    call_command("setup_schedules", stdout=io.StringIO())
    (schedule,) = Schedule.objects.filter(name=HEALTH_REPAIR)
    assert (schedule.func, schedule.schedule_type, schedule.minutes) == (
        HEALTH_REPAIR_FUNC,
        Schedule.MINUTES,
        7,
    )
    Schedule.objects.all().delete()
    assert ensure_schedules() == [HEALTH_REPAIR]


def test_health_on_episodes_and_memories_with_the_same_ids_is_kept_apart(agent, run_on_commit):
    # Ids of the two tables overlap; nodes of one must never satisfy the other.
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=prose(200, seed=1))
    episode = Episode.objects.create(pk=memory.pk, agent=agent, text=prose(200, seed=2))
    report = services.check_health()
    assert report["missing"] == [{"kind": EPISODE, "id": episode.pk, "reason": "missing"}]
    assert Episode.objects.count() == 1


# --- seed 002: health sees raw edits; at most 50 a run ----------------------------------------


def raw_text(table: str, pk: int, text: str) -> None:
    """A text change outside the services, as a script or a DBA would make it."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET text = %s WHERE id = %s", [text, pk])


@pytest.mark.parametrize("kind", [MEMORY, EPISODE])
def test_seed_002_a_short_record_edited_past_the_window_by_raw_sql_is_reported_and_repaired_by_the_next_run(
    agent, kind
):
    """Seed 002 §4: triggers cover "paths written after this design"; the health check must see the
    new text, not the token count the raw edit left behind."""
    from memory_app.tasks import repair_record_nodes

    store = services.store_memory if kind == MEMORY else services.archive_episode
    record, _ = store(agent=agent, text="a short record")
    raw_text(record._meta.db_table, record.pk, prose(200, seed=5))
    report = services.check_health()
    assert report["missing"] == [{"kind": kind, "id": record.pk, "reason": "missing"}]
    assert repair_record_nodes()["repaired"] == 1  # the scheduled run
    nodes = list(RecordNode.objects.filter(parent_kind=kind, parent_id=record.pk).order_by("node_index"))
    assert len(nodes) > 1 and nodes[-1].end_char == len(prose(200, seed=5))
    assert services.check_health()["missing_nodes"] == 0


def test_seed_002_a_raw_text_change_to_a_divided_record_is_repaired_for_the_new_text(agent, run_on_commit):
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=prose(200, seed=1))
    new_text = prose(300, seed=9)
    raw_text("memories", memory.pk, new_text)
    assert not RecordNode.objects.filter(parent_kind=MEMORY, parent_id=memory.pk).exists()  # the trigger
    assert services.check_health()["missing"] == [{"kind": MEMORY, "id": memory.pk, "reason": "missing"}]
    services.repair_all()
    nodes = list(RecordNode.objects.filter(parent_kind=MEMORY, parent_id=memory.pk).order_by("node_index"))
    assert nodes[0].start_char == 0 and nodes[-1].end_char == len(new_text)


def test_seed_002_a_long_record_edited_down_to_short_is_settled_not_reported_forever(agent, run_on_commit):
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=prose(200, seed=1))
    raw_text("memories", memory.pk, "now a short text")
    for _ in range(3):
        report = services.check_health(repair=True)
        assert report["missing_nodes"] == 0 and report["missing"] == [] and report["remaining"] == 0
        assert report["long_records"] == 0
    assert Memory.objects.get(pk=memory.pk).text == "now a short text"  # the record itself is never touched


def test_seed_002_one_run_builds_at_most_fifty_records_whatever_limit_is_asked(agent):
    """Seed 002 §3: "One run builds at most 50 records"; asking for more is refused, on every path."""
    from ragsite.errors import RagsiteError

    store_unbuilt(agent, 2, words=45)
    for limit in (51, 100, -1, True, "5"):
        with pytest.raises(RagsiteError) as caught:
            services.check_health(repair=True, limit=limit)
        assert caught.value.code == "invalid_limit" and "0 to 50" in caught.value.message
        with pytest.raises(RagsiteError):
            services.repair_records(Memory.objects.all(), limit=limit)
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="from 0 to 50") as caught:
        call_command("check_health", "--repair", "--limit", "100", stdout=io.StringIO())
    assert caught.value.returncode == 2
    assert RecordNode.objects.count() == 0  # nothing was built by a refused run
    assert services.check_health(repair=True, limit=50)["remaining"] == 0
