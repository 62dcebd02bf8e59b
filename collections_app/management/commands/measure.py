"""manage.py measure AGENT_ID NAME QUESTIONS.jsonl: measure a collection's variants against known answers."""

import json
from pathlib import Path

from django.core.management.base import CommandError

from collections_app.services.agents import get_agent, get_collection
from collections_app.services.measure import DEFAULT_MOST, measure_collection, parse_items
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Build every variant of a collection in memory and report, per variant, which questions found their "
        'answer. QUESTIONS.jsonl holds lines like {"question": "...", "answer": "marker"} and '
        '{"question": "...", "control": true}. The live collection is never written.'
    )

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("name")
        parser.add_argument("questions", help="a JSON Lines file of questions and controls")
        parser.add_argument(
            "--method", action="append", dest="methods", help="measure only this method (repeatable)"
        )
        parser.add_argument(
            "--size", action="append", type=int, dest="sizes", help="with --method: sizes (repeatable)"
        )
        parser.add_argument(
            "--around", action="append", type=int, dest="arounds", help="around values (repeatable)"
        )
        parser.add_argument("--most", type=int, default=DEFAULT_MOST)
        parser.add_argument(
            "--min-score", type=float, default=None, dest="min_score", help="a floor; default none"
        )
        parser.add_argument("--json", action="store_true", help="print the report as JSON")

    def handle(self, *args, **o):
        items = _read_jsonl(Path(o["questions"]))
        questions, controls = parse_items(items)
        collection = get_collection(agent=get_agent(o["agent_id"]), name=o["name"])
        variants = None
        if o["methods"] or o["sizes"] or o["arounds"]:
            if not o["methods"]:
                raise CommandError("--size and --around need --method")
            variants = [
                {"method": method, "size": size, "around": around}
                for method in o["methods"]
                for size in (o["sizes"] or [None])
                for around in (o["arounds"] or [0, 1])
            ]
        report = measure_collection(
            collection=collection,
            questions=questions,
            controls=controls,
            variants=variants,
            most=o["most"],
            min_score=o["min_score"],
        )
        if o["json"]:
            self.print_json(report)
            return
        self._print(report)

    def _print(self, report: dict) -> None:
        corpus, cfg = report["corpus"], report["settings"]
        self.stdout.write(
            f"{report['agent']}/{report['collection']}: {corpus['documents']} documents (digest "
            f"{corpus['digest'][:12]}), "
            f"model {report['model']} ({report['dimensions']} dimensions), mode {report['mode']}, "
            f"fusion weight {cfg['fusion_weight']}, most {cfg['most']}, floor {cfg['floor']}"
        )
        self.stdout.write(f"{report['questions']} questions, {report['controls']} controls")
        self.stdout.write(
            f"\n{'method':<10} {'size':>6} {'overlap':>7} {'around':>6} {'paragraphs':>10} "
            f"{'found':>7} {'lowest answer':>13} {'highest control':>15}  separates"
        )
        for v in report["variants"]:
            fr = v["floor_range"]
            self.stdout.write(
                f"{v['method']:<10} {_cell(v['size']):>6} {v['overlap']:>7} {v['around']:>6} "
                f"{v['paragraphs']:>10} "
                f"{v['found']:>3}/{report['questions']:<3} {_cell(fr['lowest_answer']):>13} "
                f"{_cell(fr['highest_control']):>15}  "
                f"{_cell(fr['separates'])}{'  (current)' if v.get('current') else ''}"
            )
        for s in report["skipped"]:
            self.stdout.write(f"skipped {s['method']} {_cell(s['size'])}: {s['reason']}")
        if corpus["refused"]:
            self.stdout.write(f"not read: {', '.join(corpus['refused'])}")


def _cell(value) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _read_jsonl(path: Path) -> list:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read the questions file: {type(exc).__name__}") from None
    items = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise CommandError(f"line {number} of the questions file is not JSON: {exc.msg}") from None
    return items
