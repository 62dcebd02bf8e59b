"""The database triggers that keep record nodes true to their parent (seed 002 §4).

Triggers rather than call sites, because a trigger also covers a path written later, a raw
SQL statement, or an agent deleted with all its records:

* deleting a memory or an episode deletes its nodes;
* an UPDATE that changes a record's text deletes its nodes (the service then queues new ones).
  An UPDATE that leaves the text as it was (locking a record, say) keeps them;
* an UPDATE that changes a record's text without writing its token count (a raw edit; the
  service always writes both) forgets the count, which described the old text. The health check
  then counts the new text, so a record edited past the window outside the service gets nodes
  and one edited down to fit stops being reported (seed 002 §4: "a trigger also covers paths
  written after this design").

`TRIGGERS` is the one list of their names and SQL, each with the migration that creates it. The
migrations create them from it, the system check `memory.E001` compares what the database holds
with it and then tries what they do, and `ensure_triggers` (run after every `migrate`) recreates
any that went missing. Only SQLite and PostgreSQL are supported; on PostgreSQL the node triggers
call one plpgsql function, told the parent's kind by its argument, and the count triggers another.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from django.db.backends.base.base import BaseDatabaseWrapper


class Trigger(NamedTuple):
    table: str
    sqlite: str
    postgresql: str
    migration: str = "0002_record_node_triggers"  # the memory_app migration that creates it
    function: str = "record_nodes_forget_parent"  # the plpgsql function its PostgreSQL form calls


FUNCTION = "record_nodes_forget_parent"
COUNT_FUNCTION = "records_forget_token_count"

# SECURITY DEFINER: the nodes go with their record even when the deleting request runs under
# row-level security (ragsite.rls), whose policy finds a node through its record, already gone
# in an AFTER DELETE trigger.
POSTGRES_FUNCTION_SQL = f"""
CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql
    SECURITY DEFINER SET search_path = public AS $$
BEGIN
    DELETE FROM record_nodes WHERE parent_kind = TG_ARGV[0] AND parent_id = OLD.id;
    RETURN NULL;
END
$$
"""

POSTGRES_COUNT_FUNCTION_SQL = f"""
CREATE OR REPLACE FUNCTION {COUNT_FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.token_count := NULL;
    RETURN NEW;
END
$$
"""


def _on_delete(name: str, table: str, kind: str) -> Trigger:
    return Trigger(
        table,
        f"CREATE TRIGGER IF NOT EXISTS {name} AFTER DELETE ON {table} FOR EACH ROW BEGIN "
        f"DELETE FROM record_nodes WHERE parent_kind = '{kind}' AND parent_id = OLD.id; END",
        f"CREATE TRIGGER {name} AFTER DELETE ON {table} FOR EACH ROW EXECUTE FUNCTION {FUNCTION}('{kind}')",
    )


def _on_text_change(name: str, table: str, kind: str) -> Trigger:
    # Only a real change of the text: `IS NOT` / `IS DISTINCT FROM` treat two NULLs as equal and
    # leave the nodes of an UPDATE that rewrote the same text, or touched other columns, alone.
    return Trigger(
        table,
        f"CREATE TRIGGER IF NOT EXISTS {name} AFTER UPDATE OF text ON {table} FOR EACH ROW "
        f"WHEN OLD.text IS NOT NEW.text BEGIN "
        f"DELETE FROM record_nodes WHERE parent_kind = '{kind}' AND parent_id = OLD.id; END",
        f"CREATE TRIGGER {name} AFTER UPDATE OF text ON {table} FOR EACH ROW "
        f"WHEN (OLD.text IS DISTINCT FROM NEW.text) EXECUTE FUNCTION {FUNCTION}('{kind}')",
    )


def _on_raw_text_change(name: str, table: str) -> Trigger:
    # The text changed and the count was not rewritten with it: the count describes the old text.
    # SQLite cannot assign NEW in a BEFORE trigger, so it updates the row after; that UPDATE does
    # not name the text, so no text trigger fires again.
    return Trigger(
        table,
        f"CREATE TRIGGER IF NOT EXISTS {name} AFTER UPDATE OF text ON {table} FOR EACH ROW "
        f"WHEN OLD.text IS NOT NEW.text AND OLD.token_count IS NEW.token_count BEGIN "
        f"UPDATE {table} SET token_count = NULL WHERE id = NEW.id; END",
        f"CREATE TRIGGER {name} BEFORE UPDATE OF text ON {table} FOR EACH ROW "
        f"WHEN (OLD.text IS DISTINCT FROM NEW.text AND OLD.token_count IS NOT DISTINCT FROM NEW.token_count) "
        f"EXECUTE FUNCTION {COUNT_FUNCTION}()",
        migration="0003_records_forget_stale_counts",
        function=COUNT_FUNCTION,
    )


TRIGGERS: dict[str, Trigger] = {
    "memories_delete_nodes": _on_delete("memories_delete_nodes", "memories", "mem"),
    "memories_text_change_deletes_nodes": _on_text_change(
        "memories_text_change_deletes_nodes", "memories", "mem"
    ),
    "episodes_delete_nodes": _on_delete("episodes_delete_nodes", "episodes", "ep"),
    "episodes_text_change_deletes_nodes": _on_text_change(
        "episodes_text_change_deletes_nodes", "episodes", "ep"
    ),
    "memories_text_change_forgets_count": _on_raw_text_change(
        "memories_text_change_forgets_count", "memories"
    ),
    "episodes_text_change_forgets_count": _on_raw_text_change(
        "episodes_text_change_forgets_count", "episodes"
    ),
}


def triggers_of(migration: str) -> list[str]:
    """The names of the triggers `migration` creates."""
    return [name for name, trigger in TRIGGERS.items() if trigger.migration == migration]


# Each PostgreSQL function, by name, with the statement that creates it.
POSTGRES_FUNCTIONS = {FUNCTION: POSTGRES_FUNCTION_SQL, COUNT_FUNCTION: POSTGRES_COUNT_FUNCTION_SQL}

SUPPORTED_VENDORS = ("sqlite", "postgresql")


class UnsupportedDatabase(Exception):
    """Record-node triggers exist for SQLite and PostgreSQL only."""


def _require_supported(connection: BaseDatabaseWrapper) -> None:
    if connection.vendor not in SUPPORTED_VENDORS:
        raise UnsupportedDatabase(
            f"record-node triggers are written for SQLite and PostgreSQL, not {connection.vendor}"
        )


def present_triggers(connection: BaseDatabaseWrapper) -> set[str]:
    """Names of the `TRIGGERS` that exist in the database behind `connection`."""
    _require_supported(connection)
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        else:
            # Only tables visible on the search path: another schema's namesake does not count.
            cursor.execute(
                "SELECT t.tgname FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
                "WHERE NOT t.tgisinternal AND pg_table_is_visible(c.oid)"
            )
        found = {row[0] for row in cursor.fetchall()}
    return found & set(TRIGGERS)


def missing_triggers(connection: BaseDatabaseWrapper) -> list[str]:
    """The expected trigger names the database lacks, in `TRIGGERS` order."""
    present = present_triggers(connection)
    return [name for name in TRIGGERS if name not in present]


def create_sql(name: str, vendor: str) -> str:
    """The statement creating one trigger on `vendor` ("sqlite" or "postgresql")."""
    trigger = TRIGGERS[name]
    return trigger.sqlite if vendor == "sqlite" else trigger.postgresql


def drop_sql(name: str, vendor: str) -> str:
    """The statement dropping one trigger on `vendor`, whether or not it exists."""
    if vendor == "sqlite":
        return f"DROP TRIGGER IF EXISTS {name}"
    return f"DROP TRIGGER IF EXISTS {name} ON {TRIGGERS[name].table}"


def ensure_triggers(connection: BaseDatabaseWrapper, names: Iterable[str] | None = None) -> list[str]:
    """Create whichever `TRIGGERS` (or those of `names`) are missing; returns the names created."""
    wanted = set(TRIGGERS if names is None else names)
    missing = [name for name in missing_triggers(connection) if name in wanted]
    if not missing:
        return []
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            for function in sorted({TRIGGERS[name].function for name in missing}):
                cursor.execute(POSTGRES_FUNCTIONS[function])
        for name in missing:
            cursor.execute(create_sql(name, connection.vendor))
    return missing


def replace_triggers(connection: BaseDatabaseWrapper, names: Iterable[str]) -> None:
    """Drop and create `names` again from `TRIGGERS`: for a same-named trigger that does something else."""
    names = list(names)
    _require_supported(connection)
    with connection.cursor() as cursor:
        for name in names:
            cursor.execute(drop_sql(name, connection.vendor))
    ensure_triggers(connection, names)


def drop_triggers(connection: BaseDatabaseWrapper, names: Iterable[str] | None = None) -> None:
    """Drop every trigger in `TRIGGERS`, or those of `names` (and, on PostgreSQL, functions none uses)."""
    _require_supported(connection)
    dropping = list(TRIGGERS if names is None else names)
    with connection.cursor() as cursor:
        for name in dropping:
            cursor.execute(drop_sql(name, connection.vendor))
        if connection.vendor == "postgresql":
            used = {trigger.function for name, trigger in TRIGGERS.items() if name not in dropping}
            for function in sorted(set(POSTGRES_FUNCTIONS) - used):
                cursor.execute(f"DROP FUNCTION IF EXISTS {function}()")
