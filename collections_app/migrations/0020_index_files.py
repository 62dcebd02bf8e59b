"""Each live build's index files stored beside the build, chunked, so every web node can fetch them
(issue 29, item 3; services.indexes.store).

On PostgreSQL the two tables get the row-level-security policy of the other agent-scoped tables (by
their own `agent_id`), and the chunks' column is stored without compression: the vectors and postings
barely compress and a fetch would pay pglz's time on every chunk.
"""

import django.db.models.deletion
from django.db import migrations, models

from ragsite import rls

TABLES = ("collection_index_file", "collection_index_chunk")


def install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("ALTER TABLE collection_index_chunk ALTER COLUMN data SET STORAGE EXTERNAL", None)
    schema_editor.execute(rls.grants_sql(), None)
    for table in TABLES:
        schema_editor.execute(rls.policy_sql(table, f"agent_id = {rls.CURRENT_AGENT}"), None)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(rls.drop_policy_sql(table), None)


class Migration(migrations.Migration):
    dependencies = [
        ("collections_app", "0019_collection_folder_variable_bound"),
    ]

    operations = [
        migrations.CreateModel(
            name="IndexFile",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("agent_id", models.CharField(max_length=100)),
                ("key", models.CharField(max_length=100)),
                ("path", models.CharField(max_length=200)),
                ("size", models.BigIntegerField()),
                ("sha256", models.CharField(max_length=64)),
                ("chunks", models.PositiveIntegerField()),
                (
                    "collection",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="index_files",
                        to="collections_app.collection",
                    ),
                ),
            ],
            options={
                "db_table": "collection_index_file",
            },
        ),
        migrations.CreateModel(
            name="IndexChunk",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("agent_id", models.CharField(max_length=100)),
                ("number", models.PositiveIntegerField()),
                ("data", models.BinaryField()),
                (
                    "file",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="+",
                        to="collections_app.indexfile",
                    ),
                ),
            ],
            options={
                "db_table": "collection_index_chunk",
            },
        ),
        migrations.AddConstraint(
            model_name="indexfile",
            constraint=models.UniqueConstraint(
                fields=("collection", "key", "path"), name="index_file_unique"
            ),
        ),
        migrations.AddConstraint(
            model_name="indexchunk",
            constraint=models.UniqueConstraint(fields=("file", "number"), name="index_chunk_unique"),
        ),
        migrations.RunPython(install, uninstall),
    ]
