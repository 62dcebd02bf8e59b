from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory_app"
    label = "memory_app"
    verbose_name = "Agent memory"
