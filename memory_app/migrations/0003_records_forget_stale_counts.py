"""The triggers that forget a record's token count when its text changes without it (a raw edit).

The SQL lives in `memory_app.triggers.TRIGGERS`, shared with the system check that verifies it.
"""

from django.db import migrations

from memory_app.triggers import drop_triggers, ensure_triggers, triggers_of

NAMES = triggers_of("0003_records_forget_stale_counts")


def create_triggers(apps, schema_editor):
    ensure_triggers(schema_editor.connection, NAMES)


def remove_triggers(apps, schema_editor):
    drop_triggers(schema_editor.connection, NAMES)


class Migration(migrations.Migration):
    dependencies = [("memory_app", "0002_record_node_triggers")]
    operations = [migrations.RunPython(create_triggers, remove_triggers)]
