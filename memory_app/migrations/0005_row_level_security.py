"""Row-level security on PostgreSQL for an agent's memories, episodes and their nodes (see ragsite/rls.py)."""

from django.db import migrations

from memory_app.triggers import POSTGRES_FUNCTION_SQL
from ragsite import rls

TABLES = {
    "memories": f"agent_id = {rls.CURRENT_AGENT_PK}",
    "episodes": f"agent_id = {rls.CURRENT_AGENT_PK}",
    "memory_recall_generation": f"agent_id = {rls.CURRENT_AGENT_PK}",
    # Through the parent record, whose own policy applies inside these subqueries.
    "record_nodes": "(parent_kind = 'mem' AND parent_id IN (SELECT id FROM memories)) "
    "OR (parent_kind = 'ep' AND parent_id IN (SELECT id FROM episodes))",
}


def install(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(rls.create_role_sql(), None)
    schema_editor.execute(rls.grants_sql(), None)
    # The node-deleting trigger function, now SECURITY DEFINER (see memory_app.triggers).
    schema_editor.execute(POSTGRES_FUNCTION_SQL, None)
    for table, predicate in TABLES.items():
        schema_editor.execute(rls.policy_sql(table, predicate), None)


def uninstall(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table in TABLES:
        schema_editor.execute(rls.drop_policy_sql(table), None)


class Migration(migrations.Migration):
    dependencies = [("memory_app", "0004_recall_generation"), ("collections_app", "0010_row_level_security")]
    operations = [migrations.RunPython(install, uninstall)]
