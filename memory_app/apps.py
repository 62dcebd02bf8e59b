from django.apps import AppConfig
from django.db.models.signals import post_delete, post_migrate, post_save


class MemoryConfig(AppConfig):
    name = "memory_app"
    label = "memory_app"
    verbose_name = "Agent memory"

    def ready(self):
        from . import backup, checks, mcp_tools  # noqa: F401  (registers memory.E001 and the MCP tools)
        from .models import RECORD_MODELS
        from .signals import after_migrate, record_deleted, record_saved

        backup.register()  # the agent's memories in its backup archive
        post_migrate.connect(after_migrate, sender=self, dispatch_uid="memory_app_after_migrate")
        for kind, model in RECORD_MODELS.items():
            post_save.connect(record_saved, sender=model, dispatch_uid=f"memory_app_recall_saved_{kind}")
            post_delete.connect(
                record_deleted, sender=model, dispatch_uid=f"memory_app_recall_deleted_{kind}"
            )
