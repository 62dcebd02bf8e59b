from django.apps import AppConfig
from django.db.backends.signals import connection_created
from django.db.models.signals import post_migrate


class CollectionsConfig(AppConfig):
    name = "collections_app"
    label = "collections_app"
    verbose_name = "Knowledge collections"

    def ready(self):
        from ragsite import tracing
        from ragsite.audit import set_writer
        from ragsite.mcp import set_authenticator
        from ragsite.rls import rescope_new_connection

        from . import checks, mcp_tools, signals  # noqa: F401  (system checks, MCP tools, the store guard)
        from .schedules import after_migrate
        from .services.agents import key_from_request
        from .services.audit import write_read

        set_authenticator(key_from_request)
        set_writer(write_read)
        tracing.configure()  # spans only where OTEL_EXPORTER_OTLP_ENDPOINT is set
        post_migrate.connect(
            signals.record_schema_version, sender=self, dispatch_uid="ragsite_record_schema_version"
        )
        post_migrate.connect(after_migrate, sender=self, dispatch_uid="collections_app_after_migrate")
        # A task's connection that is opened again mid-task keeps the task's agent scope (ragsite.rls).
        connection_created.connect(rescope_new_connection, dispatch_uid="ragsite_rls_rescope")
