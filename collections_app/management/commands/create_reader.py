from collections_app.services.agents import create_reader
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = "Create a reader holding one or more labels."

    def add_arguments(self, parser):
        parser.add_argument("external_id")
        parser.add_argument(
            "--label", action="append", default=[], dest="labels", help="repeat for more labels"
        )

    def handle(self, *args, external_id, labels, **options):
        reader = create_reader(external_id=external_id, labels=labels)
        names = ", ".join(reader.labels.values_list("name", flat=True)) or "no labels"
        self.stdout.write(f'Created reader "{reader.external_id}" with {names}.')
