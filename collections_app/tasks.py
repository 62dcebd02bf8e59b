"""django-q2 tasks: thin adapters that take ids and call one service.

A task that acts for one agent runs in that agent's row-level security scope on PostgreSQL
(`ragsite.rls.task_scope`), so a query in it that forgets its agent filter sees only that agent's
rows. The sweep spans agents and writes only build records, which carry no policy: it runs as the
tables' owner.
"""

from ragsite.rls import task_scope

from .services import builds, known_answers, measure
from .services.agents import agent_id_of_build, agent_id_of_measure


def run_build(build_id: int) -> str:
    """Carry out a queued build; returns its final status."""
    with task_scope(agent_id_of_build(build_id)):
        return builds.run_build(build_id).status


def sweep_stale_builds() -> int:
    """Mark builds whose worker stopped sending heartbeats as failed; returns how many."""
    return builds.fail_stale_builds()


def run_measure(measure_id: int) -> str:
    """Carry out a queued measurement; returns its final status."""
    with task_scope(agent_id_of_measure(measure_id)):
        return measure.run_measure(measure_id).status


def measure_known_answers(build_id: int) -> str:
    """Ask a build its collection's known answers after it committed; returns the report's status or "skipped"."""
    with task_scope(agent_id_of_build(build_id)):
        report = known_answers.measure_build(build_id=build_id)
    return report.status if report is not None else "skipped"
