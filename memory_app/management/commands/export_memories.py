import json

from django.core.management.base import CommandError

from collections_app.services.agents import get_agent
from memory_app.services import export_records
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Write an agent's memories and episodes as JSON lines (to FILE, or standard output). "
        "Nodes are not exported."
    )

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument(
            "file", nargs="?", default="-", help="Where to write; '-' or nothing for standard output."
        )

    def handle(self, *args, agent_id, file, **options):
        agent = get_agent(agent_id)
        lines = [json.dumps(item, ensure_ascii=False) for item in export_records(agent=agent)]
        if file == "-":
            for line in lines:
                self.stdout.write(line)
        else:
            try:
                with open(file, "w", encoding="utf-8") as out:
                    out.writelines(line + "\n" for line in lines)
            except OSError as exc:
                raise CommandError(f"cannot write {file}: {exc.strerror}") from None
        self.stderr.write(f'Exported {len(lines)} records of agent "{agent_id}".')
