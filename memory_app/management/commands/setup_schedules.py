from importlib import import_module

from django.apps import apps

from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Create (or bring up to date) the django-q2 schedules ragsite needs. Safe to run any number of times."
    )

    def handle(self, *args, **options):
        # Each app keeps its schedules in its own `schedules` module (memory's health repair,
        # collections' stale-build sweep); found by name so no app imports another for this.
        created = []
        for config in apps.get_app_configs():
            try:
                module = import_module(f"{config.name}.schedules")
            except ModuleNotFoundError:
                continue
            created += module.ensure_schedules()
        if created:
            self.stdout.write("Created: " + ", ".join(created))
        else:
            self.stdout.write("Up to date")
