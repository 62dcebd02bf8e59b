from datetime import UTC, datetime

from django.core.management.base import CommandError
from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

from collections_app.services.audit import EXPORT_FORMATS, export_lines, select_reads
from ragsite.commands import ServiceCommand


def _moment(value: str | None, option: str):
    if value is None:
        return None
    moment = parse_datetime(value)
    if moment is None:
        day = parse_date(value)
        if day is None:
            raise CommandError(f"{option} must be an ISO 8601 date or date and time, not {value!r}")
        moment = datetime(day.year, day.month, day.day)
    if timezone.is_naive(moment):
        moment = timezone.make_aware(moment, UTC)
    return moment


class Command(ServiceCommand):
    help = "Write the read audit as JSON Lines or CSV (to standard output unless --output), oldest first."

    def add_arguments(self, parser):
        parser.add_argument("--format", choices=EXPORT_FORMATS, default="jsonl")
        parser.add_argument("--agent", help="only this agent's reads")
        parser.add_argument("--reader", help="only reads for this reader")
        parser.add_argument("--collection", help="only reads of this collection (or memory kind)")
        parser.add_argument("--since", help="ISO 8601: entries at or after this moment (UTC when no zone)")
        parser.add_argument("--until", help="ISO 8601: entries before this moment")
        parser.add_argument("--output", help="a file to write instead of standard output")

    def handle(self, *args, **options):
        entries = select_reads(
            agent_id=options["agent"],
            reader=options["reader"],
            target=options["collection"],
            since=_moment(options["since"], "--since"),
            until=_moment(options["until"], "--until"),
        ).iterator()
        lines = export_lines(entries, options["format"])
        if options["output"]:
            with open(options["output"], "w", encoding="utf-8", newline="") as out:
                out.writelines(lines)
        else:
            for line in lines:
                self.stdout.write(line, ending="")
