"""System checks with stable ids: `manage.py check --database default` and `migrate` run them."""

from django.core.checks import Error, Tags, register
from django.db import DatabaseError, connections
from django.db.migrations.recorder import MigrationRecorder

from .triggers import SUPPORTED_VENDORS, missing_triggers

# The migration that creates the triggers: before it is applied, their absence is expected.
TRIGGER_MIGRATION = ("memory_app", "0002_record_node_triggers")


def triggers_expected(connection) -> bool:
    """True once the trigger migration is recorded as applied on this database."""
    recorder = MigrationRecorder(connection)
    try:
        if not recorder.has_table():
            return False
        return recorder.migration_qs.filter(app=TRIGGER_MIGRATION[0], name=TRIGGER_MIGRATION[1]).exists()
    except DatabaseError:
        return False


@register(Tags.database)
def check_record_node_triggers(app_configs=None, databases=None, **kwargs):
    """memory.E001: a record-node trigger the migration created is missing from the database."""
    errors = []
    for alias in databases or []:
        connection = connections[alias]
        if connection.vendor not in SUPPORTED_VENDORS or not triggers_expected(connection):
            continue
        missing = missing_triggers(connection)
        if missing:
            errors.append(
                Error(
                    f"database {alias!r} lacks the record-node trigger(s) {', '.join(missing)}; without them "
                    "deleting or changing a memory or episode leaves stale nodes behind",
                    hint="Run `manage.py migrate --skip-checks`: every migrate recreates missing record-node "
                    "triggers (this check would otherwise stop migrate itself).",
                    id="memory.E001",
                )
            )
    return errors
