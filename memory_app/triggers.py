"""The database triggers that keep record nodes true to their parent (seed 002 §4).

Triggers rather than call sites, because a trigger also covers a path written later, a raw
SQL statement, or an agent deleted with all its records:

* deleting a memory or an episode deletes its nodes;
* an UPDATE that changes a record's text deletes its nodes (the service then queues new ones).
  An UPDATE that leaves the text as it was (locking a record, say) keeps them.

`TRIGGERS` is the one list of their names and SQL. The migration creates them from it, the
system check `memory.E001` compares what the database holds with it, and `ensure_triggers`
(run after every `migrate`) recreates any that went missing. Only SQLite and PostgreSQL are
supported; on PostgreSQL all four triggers call one plpgsql function, told the parent's kind
by its argument.
"""

from __future__ import annotations

from typing import NamedTuple

from django.db.backends.base.base import BaseDatabaseWrapper


class Trigger(NamedTuple):
    table: str
    sqlite: str
    postgresql: str


FUNCTION = "record_nodes_forget_parent"

POSTGRES_FUNCTION_SQL = f"""
CREATE OR REPLACE FUNCTION {FUNCTION}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM record_nodes WHERE parent_kind = TG_ARGV[0] AND parent_id = OLD.id;
    RETURN NULL;
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


TRIGGERS: dict[str, Trigger] = {
    "memories_delete_nodes": _on_delete("memories_delete_nodes", "memories", "mem"),
    "memories_text_change_deletes_nodes": _on_text_change("memories_text_change_deletes_nodes", "memories", "mem"),
    "episodes_delete_nodes": _on_delete("episodes_delete_nodes", "episodes", "ep"),
    "episodes_text_change_deletes_nodes": _on_text_change("episodes_text_change_deletes_nodes", "episodes", "ep"),
}

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


def ensure_triggers(connection: BaseDatabaseWrapper) -> list[str]:
    """Create whichever `TRIGGERS` are missing; returns the names created (none when all exist)."""
    missing = missing_triggers(connection)
    if not missing:
        return []
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(POSTGRES_FUNCTION_SQL)
        for name in missing:
            cursor.execute(create_sql(name, connection.vendor))
    return missing


def drop_triggers(connection: BaseDatabaseWrapper) -> None:
    """Drop every trigger in `TRIGGERS` (and, on PostgreSQL, their function)."""
    _require_supported(connection)
    with connection.cursor() as cursor:
        for name in TRIGGERS:
            cursor.execute(drop_sql(name, connection.vendor))
        if connection.vendor == "postgresql":
            cursor.execute(f"DROP FUNCTION IF EXISTS {FUNCTION}()")
