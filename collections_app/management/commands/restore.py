from pathlib import Path

from django.core.management import CommandError

from collections_app.services.agents import get_agent
from collections_app.services.backup import restore
from ragsite.commands import ServiceCommand, key_from_file


class Command(ServiceCommand):
    help = (
        "Restore a backup archive written by `manage.py backup`: a collection for --agent (under --name, "
        "else its own), or an agent (as --name, else its own id). Nothing is overwritten. An agent's webhook "
        "secrets come back with --credentials-key (the file given to backup's --with-credentials); "
        "without it its hooks get new secrets."
    )

    def add_arguments(self, parser):
        parser.add_argument("archive", type=Path)
        parser.add_argument("--agent", help="the agent a collection is restored for")
        parser.add_argument("--name", help="a new name for the collection, or a new id for the agent")
        parser.add_argument(
            "--credentials-key",
            type=Path,
            metavar="KEYFILE",
            help="the file holding the Fernet key that sealed the archive's webhook secrets",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON line with the result")

    def handle(self, *args, archive, agent, name, json, credentials_key, **options):
        try:
            data = archive.read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {archive}: {exc.strerror}") from None
        key = key_from_file(credentials_key) if credentials_key else None
        restored = restore(data, agent=get_agent(agent) if agent else None, name=name, credentials_key=key)
        what = (
            f"collection {restored.name}" if hasattr(restored, "documents") else f"agent {restored.agent_id}"
        )
        if json:
            self.print_json({"restored": what})
        else:
            self.stdout.write(f"Restored {what}")
