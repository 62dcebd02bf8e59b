"""The schema guard: a store written by a newer ragsite is refused, never guessed at.

A store one version ahead looks almost right, and an almost-right index answers
badly rather than failing. So the version recorded in `store_meta` is compared
with the one this code writes, at start-up (a system check) and whenever a
connection to the store is opened.
"""

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

from .models import SCHEMA_VERSION

_checked_aliases: set[str] = set()


class StoreSchemaError(ImproperlyConfigured):
    """The store's schema is newer than this code understands."""


def read_schema_version(connection) -> int | None:
    """The store's recorded schema version; None when the store has none yet (not migrated)."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT value FROM store_meta WHERE key = %s", ["schema_version"])
            row = cursor.fetchone()
    except DatabaseError:
        # No store_meta table yet: a new, unmigrated database. If this happened
        # inside a transaction, leave it usable for the caller.
        if connection.in_atomic_block:
            connection.needs_rollback = True
        return None
    return int(row[0]) if row else None


def refusal_message(found: int) -> str:
    return (
        f"this store was written by a newer ragsite (schema {found}; this code knows {SCHEMA_VERSION}). "
        "Upgrade ragsite, or point DATABASE_URL at another store; this one has not been touched."
    )


def ensure_supported(connection) -> None:
    """Raise StoreSchemaError, after closing the connection, when the store is newer than this code."""
    found = read_schema_version(connection)
    if found is None:
        return
    if found > SCHEMA_VERSION:
        connection.close()
        raise StoreSchemaError(refusal_message(found))
    _checked_aliases.add(connection.alias)


def guard_on_connect(sender, connection, **kwargs) -> None:
    """connection_created receiver: check each database once per process."""
    if connection.alias in _checked_aliases:
        return
    ensure_supported(connection)
