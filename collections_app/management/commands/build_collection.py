import sys

from django.core.management import CommandError

from collections_app.models import BuildRun
from collections_app.services.agents import get_agent, get_collection
from collections_app.services.builds import build_collection, request_build
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = "Build (or rebuild) a collection from its folder and uploads."

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("name")
        parser.add_argument(
            "--sync", action="store_true", help="build in this process instead of the task cluster"
        )
        parser.add_argument(
            "--json", action="store_true", help="print one JSON line with the result at the end"
        )

    def handle(self, *args, agent_id, name, sync, json, **options):
        collection = get_collection(agent=get_agent(agent_id), name=name)
        if not sync:
            run = request_build(collection=collection, requested_by="manage.py")
            run.refresh_from_db()
            if json:
                self.print_json({"build": run.pk, "status": run.status})
            else:
                self.stdout.write(
                    f"Build {run.number} of {name} (id {run.pk}) is {run.status}; a qcluster carries it out."
                )
            return
        show_bar = not json and sys.stderr.isatty()
        # A terminal gets a bar; a log file or pipe gets one line per phase rather than silence.
        self._phase = None
        self.stderr.style_func = None  # progress is not an error: no red
        report = None if json else (self._bar if show_bar else self._phase_line)
        run = build_collection(collection=collection, requested_by="manage.py", report=report)
        if show_bar:
            self.stderr.write("")
        if json:
            self.print_json(result_of(run))
        else:
            self.stdout.write(describe(run))
        if run.status not in BuildRun.LIVE:
            raise CommandError(f"build {run.pk} {run.status}", returncode=1)

    def _phase_line(self, run: BuildRun) -> None:
        if run.paragraphs_total or run.documents_done == run.documents_total:
            phase = f"embedding {run.paragraphs_total} paragraphs" if run.paragraphs_total else None
        else:
            phase = f"reading {run.documents_total} documents"
        if phase and phase != self._phase:
            self._phase = phase
            self.stderr.write(f"build {run.pk} of {run.collection.name}: {phase}")
            self.stderr.flush()

    def _bar(self, run: BuildRun) -> None:
        width = 30
        filled = width * run.percent // 100
        self.stderr.write(
            f"\r[{'#' * filled}{'.' * (width - filled)}] {run.percent:3d}%  documents {run.documents_done}/"
            f"{run.documents_total}  paragraphs {run.paragraphs_done}/{run.paragraphs_total}",
            ending="",
        )
        self.stderr.flush()


def result_of(run: BuildRun) -> dict:
    return {
        "status": run.status,
        "passages": run.passages,
        "refused": run.refused,
        "documents_read": run.documents_read,
        "documents_reused": run.documents_reused,
        "paragraphs_embedded": run.paragraphs_embedded,
        "warnings": run.warnings,
        "problems": run.problems,
        "model": run.model,
        "error": run.error or None,
    }


def describe(run: BuildRun) -> str:
    if run.status not in BuildRun.LIVE:
        return f"Build {run.pk} {run.status}: {run.error}"
    refused = ", ".join(run.refused) if run.refused else "nothing"
    lines = [
        f"Built {run.collection.name}: {run.passages} paragraphs with {run.model}; "
        f"{run.documents_read} documents read, {run.documents_reused} reused, "
        f"{run.paragraphs_embedded} paragraphs embedded; refused: {refused}."
    ]
    lines += [f"warning: {w}" for w in run.warnings] + [f"problem: {p}" for p in run.problems]
    return "\n".join(lines)
