from django.db import migrations

# The version recorded here must follow collections_app.models.SCHEMA_VERSION;
# a later migration that changes the schema in a way older code cannot read
# bumps both.
SCHEMA_VERSION = 1


def record_version(apps, schema_editor):
    StoreMeta = apps.get_model("collections_app", "StoreMeta")
    StoreMeta.objects.update_or_create(key="schema_version", defaults={"value": str(SCHEMA_VERSION)})


class Migration(migrations.Migration):
    dependencies = [("collections_app", "0001_initial")]
    operations = [migrations.RunPython(record_version, migrations.RunPython.noop)]
