import sys

from django.core.management.base import CommandError

from collections_app.services.agents import get_agent
from memory_app.services import import_records
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Import JSON lines written by export_memories into an agent's memory, all or nothing. "
        "Records get new ids; nodes of long records are queued."
    )

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("file", help="The JSON lines file; '-' for standard input.")

    def handle(self, *args, agent_id, file, **options):
        agent = get_agent(agent_id)
        try:
            source = sys.stdin if file == "-" else open(file, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot read {file}: {exc.strerror}") from None
        try:
            counts = import_records(agent=agent, lines=source)
        finally:
            if source is not sys.stdin:
                source.close()
        self.stdout.write(
            f'Imported {counts["memories"]} memories and {counts["episodes"]} episodes into "{agent_id}"; '
            f"{counts['nodes_queued']} node builds queued."
        )
