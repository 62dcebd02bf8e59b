"""django-q2 tasks: thin adapters that take ids and call one service."""

from .services import builds, known_answers, measure


def run_build(build_id: int) -> str:
    """Carry out a queued build; returns its final status."""
    return builds.run_build(build_id).status


def sweep_stale_builds() -> int:
    """Mark builds whose worker stopped sending heartbeats as failed; returns how many."""
    return builds.fail_stale_builds()


def run_measure(measure_id: int) -> str:
    """Carry out a queued measurement; returns its final status."""
    return measure.run_measure(measure_id).status


def measure_known_answers(build_id: int) -> str:
    """Ask a build its collection's known answers after it committed; returns the report's status or "skipped"."""
    report = known_answers.measure_build(build_id=build_id)
    return report.status if report is not None else "skipped"
