from django.apps import AppConfig
from django.db.models.signals import post_migrate


class MemoryConfig(AppConfig):
    name = "memory_app"
    label = "memory_app"
    verbose_name = "Agent memory"

    def ready(self):
        from . import checks, mcp_tools  # noqa: F401  (registers memory.E001 and the MCP tools)
        from .signals import after_migrate

        post_migrate.connect(after_migrate, sender=self, dispatch_uid="memory_app_after_migrate")
