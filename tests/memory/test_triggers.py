"""The record-node triggers, proven with raw SQL (no service involved), and the check that watches them."""

import pytest
from django.core import checks
from django.db import connection

from memory_app import services
from memory_app.checks import check_record_node_triggers
from memory_app.models import EPISODE, MEMORY, Episode, Memory, RecordNode
from memory_app.triggers import TRIGGERS, drop_sql, ensure_triggers, missing_triggers, present_triggers

from .conftest import prose

pytestmark = pytest.mark.django_db


@pytest.fixture
def divided(agent, run_on_commit):
    """One long memory and one long episode, each with its nodes built."""
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=prose(200, seed=1))
    episode, _ = run_on_commit(services.archive_episode, agent=agent, text=prose(200, seed=2))
    assert RecordNode.objects.filter(parent_kind=MEMORY).exists()
    assert RecordNode.objects.filter(parent_kind=EPISODE).exists()
    return memory, episode


def count(kind, pk):
    return RecordNode.objects.filter(parent_kind=kind, parent_id=pk).count()


def sql(statement, params=()):
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def test_all_four_triggers_exist_after_migrate():
    assert present_triggers(connection) == set(TRIGGERS)


@pytest.mark.parametrize("table", ["memories", "episodes"])
def test_a_raw_sql_delete_deletes_the_records_nodes(divided, table):
    memory, episode = divided
    record = memory if table == "memories" else episode
    other = episode if table == "memories" else memory
    kept = count(other.KIND, other.pk)
    sql(f"DELETE FROM {table} WHERE id = %s", [record.pk])
    assert count(record.KIND, record.pk) == 0
    assert count(other.KIND, other.pk) == kept  # the other kind's same-numbered nodes are untouched


@pytest.mark.parametrize("table", ["memories", "episodes"])
def test_a_raw_sql_update_of_the_text_deletes_the_records_nodes(divided, table):
    memory, episode = divided
    record = memory if table == "memories" else episode
    sql(f"UPDATE {table} SET text = %s WHERE id = %s", ["something else entirely", record.pk])
    assert count(record.KIND, record.pk) == 0


def test_an_update_that_leaves_the_text_alone_keeps_the_nodes(divided):
    memory, episode = divided
    before = count(MEMORY, memory.pk)
    sql("UPDATE memories SET locked = %s WHERE id = %s", [True, memory.pk])
    sql("UPDATE memories SET text = text WHERE id = %s", [memory.pk])
    sql("UPDATE episodes SET embedding_model = 'x' WHERE id = %s", [episode.pk])
    assert count(MEMORY, memory.pk) == before
    assert count(EPISODE, episode.pk) > 0


def test_deleting_an_agent_deletes_the_nodes_of_all_its_records(divided, agent):
    agent.delete()
    assert not Memory.objects.exists() and not Episode.objects.exists()
    assert RecordNode.objects.count() == 0


def test_the_system_check_names_a_dropped_trigger_and_how_to_fix_it():
    assert check_record_node_triggers(databases=["default"]) == []
    dropped = "episodes_text_change_deletes_nodes"
    sql(drop_sql(dropped, connection.vendor))
    try:
        assert missing_triggers(connection) == [dropped]
        (error,) = check_record_node_triggers(databases=["default"])
        assert error.id == "memory.E001" and error.level == checks.ERROR
        assert dropped in error.msg and "migrate" in error.hint
        # The check is a database check, run by `check --database` and by migrate.
        ids = [e.id for e in checks.run_checks(tags=[checks.Tags.database], databases=["default"])]
        assert "memory.E001" in ids
        assert "memory.E001" not in [e.id for e in checks.run_checks()]  # not without a database
    finally:
        assert ensure_triggers(connection) == [dropped]
    assert check_record_node_triggers(databases=["default"]) == []


def test_without_the_trigger_a_text_change_would_leave_stale_nodes(divided):
    """The control for the trigger tests: the same raw UPDATE, with the trigger dropped."""
    memory, _ = divided
    sql(drop_sql("memories_text_change_deletes_nodes", connection.vendor))
    try:
        sql("UPDATE memories SET text = %s WHERE id = %s", ["replaced", memory.pk])
        assert count(MEMORY, memory.pk) > 0
        report = services.check_health()
        assert report["missing_triggers"] == ["memories_text_change_deletes_nodes"]
    finally:
        ensure_triggers(connection)


def test_after_migrate_recreates_missing_triggers(settings):
    from django.apps import apps

    from memory_app.signals import after_migrate

    sql(drop_sql("memories_delete_nodes", connection.vendor))
    after_migrate(sender=apps.get_app_config("memory_app"), using="default")
    assert missing_triggers(connection) == []


# --- the stored token count and the behaviour check ----------------------------------------------


def test_a_raw_text_change_forgets_the_token_count_and_the_service_keeps_its_own(agent):
    memory, _ = services.store_memory(agent=agent, text="a short memory of five words")
    counted = Memory.objects.get(pk=memory.pk).token_count
    assert counted is not None
    sql("UPDATE memories SET locked = %s WHERE id = %s", [True, memory.pk])
    assert Memory.objects.get(pk=memory.pk).token_count == counted  # not a text change
    sql("UPDATE memories SET locked = %s, text = text WHERE id = %s", [False, memory.pk])
    assert Memory.objects.get(pk=memory.pk).token_count == counted  # the same text
    sql(
        "UPDATE memories SET text = %s WHERE id = %s",
        ["edited by hand, much longer than before it was", memory.pk],
    )
    assert Memory.objects.get(pk=memory.pk).token_count is None  # described the old text
    text = "a new text through the service"
    services.update_text(agent=agent, kind=MEMORY, id=memory.pk, text=text)
    assert (
        Memory.objects.get(pk=memory.pk).token_count == len(text.split()) + 2
    )  # words and the special tokens


def noop_trigger_sql(name: str) -> list[str]:
    """A trigger of the same name on the same table that does nothing."""
    table = TRIGGERS[name].table
    if connection.vendor == "sqlite":
        return [f"CREATE TRIGGER {name} AFTER UPDATE ON {table} FOR EACH ROW BEGIN SELECT 1; END"]
    return [
        "CREATE OR REPLACE FUNCTION test_does_nothing() RETURNS trigger LANGUAGE plpgsql AS $$ "
        "BEGIN RETURN NEW; END $$",
        f"CREATE TRIGGER {name} AFTER UPDATE ON {table} FOR EACH ROW EXECUTE FUNCTION test_does_nothing()",
    ]


@pytest.mark.parametrize("name", list(TRIGGERS))
def test_seed_002_the_trigger_check_fails_when_a_same_named_trigger_does_not_do_its_work(name):
    """Seed 002 §4 is kept by triggers, so the check tries them: a same-named trigger whose body was
    replaced passes a check of names and would leave stale nodes; this one names it, and migrate
    replaces it."""
    from django.apps import apps

    from memory_app.signals import after_migrate

    sql(drop_sql(name, connection.vendor))
    for statement in noop_trigger_sql(name):
        sql(statement)
    try:
        assert name not in missing_triggers(connection)  # present by name...
        (error,) = check_record_node_triggers(databases=["default"])
        assert error.id == "memory.E001" and name in error.msg and "do not do their work" in error.msg
        assert "migrate" in error.hint
        after_migrate(sender=apps.get_app_config("memory_app"), using="default")
        assert check_record_node_triggers(databases=["default"]) == []
    finally:
        sql(drop_sql(name, connection.vendor))
        ensure_triggers(connection)
        if connection.vendor == "postgresql":
            sql("DROP FUNCTION IF EXISTS test_does_nothing()")


def test_trying_the_triggers_leaves_nothing_behind(divided, agent):
    from collections_app.models import Agent

    before = (
        Agent.objects.count(),
        Memory.objects.count(),
        Episode.objects.count(),
        RecordNode.objects.count(),
    )
    assert check_record_node_triggers(databases=["default"]) == []
    assert (
        Agent.objects.count(),
        Memory.objects.count(),
        Episode.objects.count(),
        RecordNode.objects.count(),
    ) == before


def test_a_database_migrated_before_the_count_triggers_is_not_faulted_for_lacking_them():
    """Upgrading must stay possible: the count triggers are expected once their migration has run."""
    from django.db.migrations.recorder import MigrationRecorder

    from memory_app.triggers import triggers_of

    recorder = MigrationRecorder(connection)
    newer = triggers_of("0003_records_forget_stale_counts")
    applied = recorder.migration_qs.get(app="memory_app", name="0003_records_forget_stale_counts")
    for name in newer:
        sql(drop_sql(name, connection.vendor))
    applied.delete()
    try:
        assert check_record_node_triggers(databases=["default"]) == []
    finally:
        recorder.record_applied("memory_app", "0003_records_forget_stale_counts")
        ensure_triggers(connection)
