"""Records' validity (valid_from, valid_until) and tags (docs/memory.md, "Time and tags").

On SQLite, adding a column with a default and a constraint remakes the tables, which drops their
triggers; they are made again from `memory_app.triggers.TRIGGERS` at the end.
"""

from django.db import migrations, models

from memory_app.triggers import ensure_triggers, triggers_of


def recreate_triggers(apps, schema_editor):
    names = triggers_of("0002_record_node_triggers") + triggers_of("0003_records_forget_stale_counts")
    ensure_triggers(schema_editor.connection, names)


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0007_recall_epoch"),
    ]

    operations = [
        migrations.AddField(
            model_name="episode",
            name="tags",
            field=models.JSONField(
                blank=True, default=list, help_text="At most 20 strings of 1-64 characters."
            ),
        ),
        migrations.AddField(
            model_name="episode",
            name="valid_from",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="episode",
            name="valid_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="memory",
            name="tags",
            field=models.JSONField(
                blank=True, default=list, help_text="At most 20 strings of 1-64 characters."
            ),
        ),
        migrations.AddField(
            model_name="memory",
            name="valid_from",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="memory",
            name="valid_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddConstraint(
            model_name="episode",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("valid_from__isnull", True),
                    ("valid_until__isnull", True),
                    ("valid_from__lt", models.F("valid_until")),
                    _connector="OR",
                ),
                name="episodes_validity",
            ),
        ),
        migrations.AddConstraint(
            model_name="memory",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    ("valid_from__isnull", True),
                    ("valid_until__isnull", True),
                    ("valid_from__lt", models.F("valid_until")),
                    _connector="OR",
                ),
                name="memories_validity",
            ),
        ),
        migrations.RunPython(recreate_triggers, migrations.RunPython.noop),
    ]
