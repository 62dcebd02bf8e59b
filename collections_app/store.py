"""The schema guard: a store this code does not know is refused, never guessed at.

A store one version ahead looks almost right, and an almost-right index answers
badly rather than failing. So the version recorded in `store_meta` is compared
with the one this code writes, at start-up (a system check) and whenever a
connection to the store is opened. A version that is not a whole number, or that a
migrated store does not record at all, is as unknown as a newer one and refused the
same way.
"""

from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError

from .models import SCHEMA_VERSION

_checked_aliases: set[str] = set()

# The migration that records schema_version: before it has run, a missing version is a store
# still being migrated, not an unknown one.
VERSION_MIGRATION = ("collections_app", "0002_schema_version")


class StoreSchemaError(ImproperlyConfigured):
    """The store's schema is one this code does not know (newer, unreadable or unrecorded)."""


def read_schema_version(connection) -> int | None:
    """The store's recorded schema version; None when the store has none yet (not migrated).

    Raises StoreSchemaError when the store records a version this code cannot read: one that is
    not a whole number, or none at all once the migration that writes it has run.
    """
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
    if row is None:
        if _version_migration_applied(connection):
            raise StoreSchemaError(
                "this store records no schema version, so which ragsite wrote it is unknown. " + _ADVICE
            )
        return None
    value = row[0]
    try:
        return int(str(value).strip())
    except ValueError:
        raise StoreSchemaError(
            f'this store records schema version "{str(value)[:40]}", which is not a version this code knows '
            f"(it knows {SCHEMA_VERSION}). " + _ADVICE
        ) from None


def _version_migration_applied(connection) -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT 1 FROM django_migrations WHERE app = %s AND name = %s", list(VERSION_MIGRATION)
            )
            return cursor.fetchone() is not None
    except DatabaseError:
        if connection.in_atomic_block:
            connection.needs_rollback = True
        return False


_ADVICE = "Upgrade ragsite, or point DATABASE_URL at another store; this one has not been touched."


def refusal_message(found: int) -> str:
    return (
        f"this store was written by a newer ragsite (schema {found}; this code knows {SCHEMA_VERSION}). "
        + _ADVICE
    )


def schema_problem(connection) -> str | None:
    """Why this code refuses the store behind `connection`, or None when it knows it (or it is not migrated
    yet).

    Opening the connection runs the guard, whose refusal is reported here rather than raised.
    """
    try:
        found = read_schema_version(connection)
    except StoreSchemaError as exc:
        return str(exc)
    if found is not None and found > SCHEMA_VERSION:
        return refusal_message(found)
    return None


def ensure_supported(connection) -> None:
    """Raise StoreSchemaError, after closing the connection, when the store is not one this code knows."""
    problem = schema_problem(connection)
    if problem is not None:
        # Closed before raising, so whoever catches this can still move the store aside.
        connection.close()
        raise StoreSchemaError(problem)
    if read_schema_version(connection) is not None:
        _checked_aliases.add(connection.alias)


def guard_on_connect(sender, connection, **kwargs) -> None:
    """connection_created receiver: check each database once per process."""
    if connection.alias in _checked_aliases:
        return
    ensure_supported(connection)
