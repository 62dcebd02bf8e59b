"""The agent-less KNOWLEDGE_<NAME>_FOLDER serves only a collection staff bound to it (issue 24, item 1).

Before, it served whichever agent alone had a collection of that name, counted inside the caller's
row-level-security scope (so on PostgreSQL every agent counted only itself). Nothing is bound here on
purpose: binding whoever holds the name today would make a first-come claim permanent. A deployment
that relied on the old rule binds its collection once (`manage.py bind_folder <agent> <collection>` or
the admin) or renames the variable to KNOWLEDGE_<AGENT>__<NAME>_FOLDER.
"""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("collections_app", "0018_document_ocr_paragraph_pages"),
    ]

    operations = [
        migrations.AddField(
            model_name="collection",
            name="folder_variable_bound",
            field=models.BooleanField(
                db_default=False,
                default=False,
                help_text="Build from KNOWLEDGE_<NAME>_FOLDER (the variable without an agent). Staff "
                "binds it; at most one collection of a name may be bound. KNOWLEDGE_<AGENT>__<NAME>_FOLDER "
                "needs no binding.",
            ),
        ),
        migrations.AddConstraint(
            model_name="collection",
            constraint=models.UniqueConstraint(
                condition=models.Q(("folder_variable_bound", True)),
                fields=("name",),
                name="collection_one_bound_per_name",
            ),
        ),
    ]
