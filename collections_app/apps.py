from django.apps import AppConfig


class CollectionsConfig(AppConfig):
    name = "collections_app"
    label = "collections_app"
    verbose_name = "Knowledge collections"

    def ready(self):
        from . import checks, signals  # noqa: F401  (registers the system checks and the store guard)
