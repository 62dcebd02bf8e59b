"""Row-level security on the collection tables that hold an agent's questions and history: build
and measure runs (document names, refusals, the questions asked), known answers and their reports.
The same policy as documents: through the collection, whose own policy applies in the subquery.

Outside any scope (migrations, the admin, commands, the build sweep's schedule) nothing changes.
Inside a request's scope the sweep a build request starts fails only that agent's dead builds;
the scheduled sweep, as the owner, fails everyone's (see docs/security.md)."""

from django.db import migrations

from ragsite import rls

THROUGH_COLLECTION = "collection_id IN (SELECT id FROM collections_app_collection)"
TABLES = (
    "collections_app_buildrun",
    "collections_app_measurerun",
    "collections_app_knownanswer",
    "collections_app_knownanswersreport",
)


def install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(rls.policy_sql(table, THROUGH_COLLECTION), None)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(rls.drop_policy_sql(table), None)


class Migration(migrations.Migration):
    dependencies = [("collections_app", "0012_paragraph_fewer_indexes")]
    operations = [migrations.RunPython(install, uninstall)]
