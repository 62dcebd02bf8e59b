"""manage.py known_answers AGENT_ID NAME [FILE.jsonl]: set (or show) a collection's known answers."""

from pathlib import Path

from django.core.management.base import CommandError

from collections_app.services import known_answers
from collections_app.services.agents import get_agent, get_collection
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        'Replace a collection\'s known answers with FILE.jsonl (lines like {"question": "...", "answer": '
        '"marker"} and {"question": "...", "control": true}; at most 200), or, without FILE, show them and '
        "how the latest build did. Every build is then asked them; the live build is measured at once."
    )

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("name")
        parser.add_argument("file", nargs="?", help="a JSON Lines file of questions and controls")
        parser.add_argument("--clear", action="store_true", help="remove every known answer")
        floor = parser.add_mutually_exclusive_group()
        floor.add_argument(
            "--measured-floor",
            action="store_true",
            dest="measured",
            help="read the collection's floor off its known answers",
        )
        floor.add_argument(
            "--no-measured-floor",
            action="store_true",
            dest="not_measured",
            help="stop reading the floor off them (the override or MIN_SCORE applies)",
        )
        parser.add_argument("--json", action="store_true", help="print the set and the latest report as JSON")

    def handle(self, *args, **o):
        collection = get_collection(agent=get_agent(o["agent_id"]), name=o["name"])
        if o["file"] and o["clear"]:
            raise CommandError("give a FILE or --clear, not both")
        floor_measured = True if o["measured"] else False if o["not_measured"] else None
        if o["file"] or o["clear"] or floor_measured is not None:
            items = _read(Path(o["file"])) if o["file"] else [] if o["clear"] else None
            if items is None:  # only the floor changes: keep the set as it is
                items = known_answers.as_items(known_answers.known_answers(collection))
            checked = known_answers.set_known_answers(
                collection=collection, items=items, floor_measured=floor_measured
            )
            if not o["json"]:
                controls = sum(1 for q in checked if q.control)
                self.stdout.write(
                    f"{collection.agent.agent_id}/{collection.name}: {len(checked) - controls} known "
                    f"answers and {controls} controls; floor measured: {collection.floor_measured}"
                )
        described = known_answers.describe(collection)
        if o["json"]:
            self.print_json(described)
        elif not (o["file"] or o["clear"] or floor_measured is not None):
            self._print(described)

    def _print(self, described: dict) -> None:
        questions = described["questions"]
        controls = sum(1 for q in questions if q.get("control"))
        self.stdout.write(
            f"{len(questions) - controls} known answers, {controls} controls; "
            f"floor measured: {described['floor_measured']}"
        )
        report = described["report"]
        if report is None:
            self.stdout.write("no build has been measured against them yet")
            return
        if report["status"] == "failed":
            self.stdout.write(f"build {report['build']}: not measured: {report['error']}")
            return
        self.stdout.write(
            f"build {report['build']}: found {report['found_at_1']}@1, {report['found_at_5']}@5 of "
            f"{report['answers']} "
            f"at floor {report['floor']} ({report['floor_source']}); lowest answer "
            f"{report['lowest_answer']}, "
            f"highest control {report['highest_control']}, separate: {report['separates']}; "
            f"measured floor {report['measured_floor']}"
        )
        for warning in report["warnings"]:
            self.stdout.write(f"warning: {warning}")


def _read(path: Path) -> list:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read the known answers file: {type(exc).__name__}") from None
    return known_answers.parse_jsonl(data)
