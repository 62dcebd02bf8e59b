"""A base for ragsite's commands: service refusals become a message and a non-zero exit."""

import json

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
