"""Row-level security on PostgreSQL for the collection tables an agent owns (see ragsite/rls.py)."""

from django.db import migrations

from ragsite import rls

TABLES = {
    "agents_chunks": f"agent_id = {rls.CURRENT_AGENT}",
    "collection_built": f"agent_id = {rls.CURRENT_AGENT}",
    "collections_app_collection": f"agent_id = {rls.CURRENT_AGENT_PK}",
    "collections_app_modelcall": f"agent_id = {rls.CURRENT_AGENT_PK}",
    # Through the collection, whose own policy applies inside this subquery.
    "collections_app_document": "collection_id IN (SELECT id FROM collections_app_collection)",
}


def install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(rls.create_role_sql(), None)
    schema_editor.execute(rls.grants_sql(), None)
    for table, predicate in TABLES.items():
        # A key that may act for others charges another agent's ledger: it may write such a row,
        # and still reads only its own.
        check = "true" if table == "collections_app_modelcall" else None
        schema_editor.execute(rls.policy_sql(table, predicate, check), None)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(rls.drop_policy_sql(table), None)


class Migration(migrations.Migration):
    dependencies = [("collections_app", "0009_build_lease")]
    operations = [migrations.RunPython(install, uninstall)]
