from django.apps import AppConfig
from django.db.models.signals import post_migrate


class CollectionsConfig(AppConfig):
    name = "collections_app"
    label = "collections_app"
    verbose_name = "Knowledge collections"

    def ready(self):
        from . import checks, signals  # noqa: F401  (registers the system checks and the store guard)
        from .schedules import after_migrate

        post_migrate.connect(after_migrate, sender=self, dispatch_uid="collections_app_after_migrate")
