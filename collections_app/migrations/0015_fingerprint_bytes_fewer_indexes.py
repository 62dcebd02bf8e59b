"""A paragraph's text fingerprint is stored as the SHA-256's 32 bytes instead of its 64 hex characters
(collections_app.fields.DigestField: Python still reads and writes the hex), and four foreign keys lose
an index that a unique constraint or another index already leads with (issue 16, storage).

Every row's hex is turned into its bytes, in batches, through a new column that then takes the old one's
name; a value that is not a SHA-256 in hex (no build writes one) is computed again from the text, which
is what the fingerprint is. Going back spells the bytes as hex again. On PostgreSQL the paragraph table's
row-level-security policy names only `agent_id`, so it holds through the change untouched.
"""

import hashlib
import re

import django.db.models.deletion
from django.db import migrations, models

import collections_app.fields

BATCH = 2000
HEX = re.compile(r"[0-9a-f]{64}")


def _rewrite(apps, schema_editor, read: str, write: str, convert) -> None:
    Paragraph = apps.get_model("collections_app", "Paragraph")
    table, quote = Paragraph._meta.db_table, schema_editor.connection.ops.quote_name
    update = f"UPDATE {quote(table)} SET {quote(write)} = %s WHERE {quote('id')} = %s"
    rows = Paragraph.objects.order_by("pk").values_list("pk", read, "text")
    changed = []
    with schema_editor.connection.cursor() as cursor:
        for pk, value, text in rows.iterator(chunk_size=BATCH):
            changed.append((convert(value, text), pk))
            if len(changed) >= BATCH:
                cursor.executemany(update, changed)
                changed.clear()
        if changed:
            cursor.executemany(update, changed)


def _to_bytes(hex_value, text) -> bytes:
    if not (isinstance(hex_value, str) and HEX.fullmatch(hex_value)):
        hex_value = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return bytes.fromhex(hex_value)


def to_bytes(apps, schema_editor):
    # The historical `digest` field is a DigestField, so its values are written here as raw bytes.
    _rewrite(apps, schema_editor, "fingerprint", "digest", _to_bytes)


def to_hex(apps, schema_editor):
    # `digest` is read through DigestField, which already spells it as hex.
    _rewrite(apps, schema_editor, "digest", "fingerprint", lambda hex_value, _text: hex_value)


class Migration(migrations.Migration):
    dependencies = [("collections_app", "0014_search_held_back_index")]

    operations = [
        migrations.AlterField(
            model_name="collection",
            name="agent",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="collections",
                to="collections_app.agent",
            ),
        ),
        migrations.AlterField(
            model_name="document",
            name="collection",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="documents",
                to="collections_app.collection",
            ),
        ),
        migrations.AlterField(
            model_name="knownanswer",
            name="collection",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="known_answers",
                to="collections_app.collection",
            ),
        ),
        migrations.AlterField(
            model_name="knownanswersreport",
            name="collection",
            field=models.ForeignKey(
                db_index=False,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="known_answer_reports",
                to="collections_app.collection",
            ),
        ),
        migrations.AddField(
            model_name="paragraph",
            name="digest",
            field=collections_app.fields.DigestField(null=True),
        ),
        migrations.RunPython(to_bytes, to_hex),
        # blank: no change to the table, but going back re-adds the hex column filled with "" (the
        # rows are then written by to_hex) instead of NULL, which a NOT NULL column refuses.
        migrations.AlterField(
            model_name="paragraph", name="fingerprint", field=models.CharField(max_length=64, blank=True)
        ),
        migrations.RemoveField(model_name="paragraph", name="fingerprint"),
        migrations.RenameField(model_name="paragraph", old_name="digest", new_name="fingerprint"),
        migrations.AlterField(
            model_name="paragraph",
            name="fingerprint",
            field=collections_app.fields.DigestField(
                help_text="SHA-256 of the text (32 bytes in the row, hex in Python)."
            ),
        ),
    ]
