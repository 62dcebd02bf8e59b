"""Reading a collection's known answers: its reports for the admin, the API and the build status."""

from ...models import (
    BuildRun,
    Collection,
    KnownAnswersReport,
)
from .the_set import as_items, known_answers

HISTORY = 20  # builds in the collection page's sparkline


def for_build(run: BuildRun) -> dict | None:
    """A build's own report, without per-question results: the build status's ``known_answers`` (null:
    none)."""
    report = KnownAnswersReport.objects.filter(build=run).first()
    return summary(report)


def history(collection: Collection, limit: int = HISTORY) -> list[KnownAnswersReport]:
    """The reports of the collection's last ``limit`` live builds, oldest first (the sparkline)."""
    reports = (
        KnownAnswersReport.objects.of_live_builds()
        .filter(collection=collection)
        .select_related("build")  # the chart labels each point with its build's number
        .order_by("-build_id")[:limit]
    )
    return list(reversed(reports))


def summary(report: KnownAnswersReport | None, *, results: bool = False) -> dict | None:
    """A report as JSON for the API and the build status: counts, the bands, the floor, warnings."""
    if report is None:
        return None
    out = {
        "build": report.build_id,
        "status": report.status,
        "measured_at": report.measured_at,
        "answers": report.answers,
        "controls": report.controls,
        "found_at_1": report.found_at_1,
        "found_at_5": report.found_at_5,
        "floor": report.floor,
        "floor_source": report.floor_source or None,
        "lowest_answer": report.lowest_answer,
        "highest_control": report.highest_control,
        "separates": report.separates,
        "measured_floor": report.measured_floor,
        "lost": report.lost,
        "warnings": report.warnings,
        "error": report.error or None,
    }
    if results:
        out["results"] = report.results
    return out


def latest_report(collection: Collection) -> KnownAnswersReport | None:
    """The report of the collection's most recent build that has one (live, refused by the gate, or
    failed)."""
    return (
        KnownAnswersReport.objects.filter(collection=collection)
        .select_related("build")
        .order_by("-build_id")
        .first()
    )


def describe(collection: Collection) -> dict:
    """The set and the latest report with its per-question results, JSON-ready (the API, the command's
    --json)."""
    return {
        "collection": collection.name,
        "questions": as_items(known_answers(collection)),
        "floor_measured": collection.floor_measured,
        "report": summary(latest_report(collection), results=True),
    }
