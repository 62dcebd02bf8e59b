"""django-q2 tasks: thin adapters that take ids and call one service."""

from .services import builds, measure


def run_build(build_id: int) -> str:
    """Carry out a queued build; returns its final status."""
    return builds.run_build(build_id).status


def sweep_stale_builds() -> int:
    """Mark builds whose worker stopped sending heartbeats as failed; returns how many."""
    return builds.fail_stale_builds()


def run_measure(measure_id: int) -> str:
    """Carry out a queued measurement; returns its final status."""
    return measure.run_measure(measure_id).status
