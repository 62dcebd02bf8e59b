"""Webhook signing secrets encrypted at rest (collections_app/sealed.py): the column widens to hold a Fernet
token, and every secret written before is sealed in place (reversed: opened again)."""

from django.db import migrations

import collections_app.fields
import collections_app.models.sync


def seal_existing(apps, schema_editor):
    Webhook = apps.get_model("collections_app", "Webhook")
    for hook in Webhook.objects.using(schema_editor.connection.alias).all():
        hook.save(update_fields=["secret"])  # read plain (a row from before), written sealed


def open_existing(apps, schema_editor):
    from collections_app.sealed import open_sealed

    table = apps.get_model("collections_app", "Webhook")._meta.db_table
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(f"SELECT id, secret FROM {table}")
        for pk, value in cursor.fetchall():
            plain = open_sealed(value)
            if plain is not None and plain != value:
                cursor.execute(f"UPDATE {table} SET secret = %s WHERE id = %s", [plain, pk])


class Migration(migrations.Migration):
    dependencies = [
        ("collections_app", "0020_index_files"),
    ]

    operations = [
        migrations.AlterField(
            model_name="webhook",
            name="secret",
            field=collections_app.fields.SealedSecretField(
                default=collections_app.models.sync.new_secret, editable=False, max_length=400
            ),
        ),
        migrations.RunPython(seal_existing, open_existing),
    ]
