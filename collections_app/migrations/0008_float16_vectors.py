"""Paragraph vectors go from float32 to float16 (collections_app.vector_codec): half the storage.

Every stored vector is rewritten in place, in batches; a vector's width does not matter to the
conversion (element by element), so the build records are not read. Going back converts again.
"""

import numpy as np
from django.db import migrations

BATCH = 2000


def _convert(apps, source: str, target: str) -> None:
    Paragraph = apps.get_model("collections_app", "Paragraph")
    rows = Paragraph.objects.filter(embedding__isnull=False).order_by("pk").values_list("pk", "embedding")
    changed = []
    for pk, blob in rows.iterator(chunk_size=BATCH):
        vector = np.frombuffer(bytes(blob), dtype=source).astype(target)
        changed.append(Paragraph(pk=pk, embedding=vector.tobytes()))
        if len(changed) >= BATCH:
            Paragraph.objects.bulk_update(changed, ["embedding"])
            changed.clear()
    if changed:
        Paragraph.objects.bulk_update(changed, ["embedding"])


def to_float16(apps, schema_editor):
    _convert(apps, "<f4", "<f2")


def to_float32(apps, schema_editor):
    _convert(apps, "<f2", "<f4")


class Migration(migrations.Migration):
    dependencies = [("collections_app", "0007_built_index_id")]

    operations = [migrations.RunPython(to_float16, to_float32)]
