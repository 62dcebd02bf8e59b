from django.db import migrations, models


def number_existing_builds(apps, schema_editor):
    """Each collection's builds counted from 1 in the order they were requested."""
    BuildRun = apps.get_model("collections_app", "BuildRun")
    numbers: dict[int, int] = {}
    for pk, collection_id in BuildRun.objects.order_by("created_at", "id").values_list("pk", "collection_id"):
        numbers[collection_id] = numbers.get(collection_id, 0) + 1
        BuildRun.objects.filter(pk=pk).update(number=numbers[collection_id])


class Migration(migrations.Migration):
    dependencies = [
        ("collections_app", "0023_review_paragraphs_and_sync_retries"),
    ]

    operations = [
        migrations.AddField(
            model_name="buildrun",
            name="number",
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.RunPython(number_existing_builds, migrations.RunPython.noop),
        migrations.AddField(
            model_name="document",
            name="read_notes",
            field=models.JSONField(blank=True, db_default=[], default=list),
        ),
    ]
