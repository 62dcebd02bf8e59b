from pathlib import Path

from django.core.management import CommandError

from collections_app.services.agents import get_agent, get_collection
from collections_app.services.backup import back_up
from ragsite.commands import ServiceCommand, key_from_file


class Command(ServiceCommand):
    help = (
        "Write one backup archive: of AGENT's collection NAME (everything it holds), or with no NAME of the "
        "agent itself (settings, webhooks, memories with their nodes). Webhook secrets are left out unless "
        "--with-credentials names a file holding a Fernet key of yours: then they are sealed with it. "
        "Restore it with `manage.py restore`."
    )

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("name", nargs="?", help="a collection; left out: the agent")
        parser.add_argument("--out", type=Path, required=True, help="the archive file to write (.tar.gz)")
        parser.add_argument(
            "--with-credentials",
            type=Path,
            metavar="KEYFILE",
            help="an agent's webhook secrets too, sealed with the Fernet key in this file (kept by you)",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON line with the result")

    def handle(self, *args, agent_id, name, out, json, with_credentials, **options):
        agent = get_agent(agent_id)
        if with_credentials and name:
            raise CommandError(
                "a collection's archive holds no credentials: --with-credentials is an agent's"
            )
        key = key_from_file(with_credentials) if with_credentials else None
        if name:
            data = back_up(collection=get_collection(agent=agent, name=name))
        else:
            data = back_up(agent=agent, credentials_key=key)
        out.write_bytes(data)
        what = f"collection {name}" if name else f"agent {agent_id}"
        if json:
            self.print_json({"backup": what, "file": str(out), "bytes": len(data)})
        else:
            self.stdout.write(f"Backed up {what} to {out} ({len(data):,} bytes)")
