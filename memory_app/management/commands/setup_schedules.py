from memory_app.schedules import HEALTH_REPAIR, ensure_schedules
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = "Create (or bring up to date) the django-q2 schedules ragsite needs. Safe to run any number of times."

    def handle(self, *args, **options):
        created = ensure_schedules()
        if created:
            self.stdout.write("Created: " + ", ".join(created))
        else:
            self.stdout.write(f"Up to date: {HEALTH_REPAIR}")
