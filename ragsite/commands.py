"""A base for ragsite's commands: service refusals become a message and a non-zero exit."""

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ragsite.errors import RagsiteError


class ServiceCommand(BaseCommand):
    def execute(self, *args, **options):
        try:
            return super().execute(*args, **options)
        except RagsiteError as exc:
            raise CommandError(exc.message, returncode=2) from None

    def print_json(self, payload) -> None:
        self.stdout.write(json.dumps(payload, ensure_ascii=False, default=str))


def key_from_file(path: Path) -> str:
    """A key the operator keeps in a file (so it is in no process list or shell history), stripped."""
    try:
        return path.read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read the credentials key from {path}: {type(exc).__name__}") from None
