from pathlib import Path

from collections_app.services.agents import get_agent, get_collection
from collections_app.services.backup import back_up
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Write one backup archive: of AGENT's collection NAME (everything it holds), or with no NAME of the "
        "agent itself (settings, webhooks without secrets, memories with their nodes). Restore it with "
        "`manage.py restore`."
    )

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("name", nargs="?", help="a collection; left out: the agent")
        parser.add_argument("--out", type=Path, required=True, help="the archive file to write (.tar.gz)")
        parser.add_argument("--json", action="store_true", help="print one JSON line with the result")

    def handle(self, *args, agent_id, name, out, json, **options):
        agent = get_agent(agent_id)
        data = back_up(collection=get_collection(agent=agent, name=name)) if name else back_up(agent=agent)
        out.write_bytes(data)
        what = f"collection {name}" if name else f"agent {agent_id}"
        if json:
            self.print_json({"backup": what, "file": str(out), "bytes": len(data)})
        else:
            self.stdout.write(f"Backed up {what} to {out} ({len(data):,} bytes)")
