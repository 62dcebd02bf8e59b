"""The triggers that delete a record's nodes when it is deleted or its text changes.

The SQL lives in `memory_app.triggers.TRIGGERS`, shared with the system check that verifies it.
Changing a trigger later therefore needs a new migration that drops and recreates it.
"""

from django.db import migrations

from memory_app.triggers import drop_triggers, ensure_triggers, triggers_of

NAMES = triggers_of("0002_record_node_triggers")


def create_triggers(apps, schema_editor):
    # ensure_triggers picks the SQLite or PostgreSQL form from connection.vendor and refuses others.
    ensure_triggers(schema_editor.connection, NAMES)


def remove_triggers(apps, schema_editor):
    drop_triggers(schema_editor.connection, NAMES)


class Migration(migrations.Migration):
    dependencies = [("memory_app", "0001_initial")]
    operations = [migrations.RunPython(create_triggers, remove_triggers)]
