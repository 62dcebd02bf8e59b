"""django-q2 tasks: thin adapters that take ids and call one service.

A task queued by a request (or a build) carries that request's trace context (`trace=`), and
`tracing.continues_trace` starts its span as a child of the request's, so one trace runs from the
request through the queue to the work.

A task that acts for one agent runs in that agent's row-level security scope on PostgreSQL
(`ragsite.rls.task_scope`), so a query in it that forgets its agent filter sees only that agent's
rows. The sweep spans agents and writes only build records, which carry no policy: it runs as the
tables' owner.
"""

from ragsite import tracing
from ragsite.rls import task_scope

from .models import Collection
from .services import audit, builds, known_answers, measure, origins, sync, sync_check, webhooks
from .services.agents import (
    agent_id_of_build,
    agent_id_of_collection,
    agent_id_of_delivery,
    agent_id_of_measure,
)


@tracing.continues_trace
def run_build(build_id: int) -> str:
    """Carry out a queued build; returns its final status."""
    with task_scope(agent_id_of_build(build_id)):
        return builds.run_build(build_id).status


def sweep_stale_builds() -> int:
    """Mark builds whose worker stopped sending heartbeats as failed; returns how many."""
    return builds.fail_stale_builds()


@tracing.continues_trace
def run_measure(measure_id: int) -> str:
    """Carry out a queued measurement; returns its final status."""
    with task_scope(agent_id_of_measure(measure_id)):
        return measure.run_measure(measure_id).status


@tracing.continues_trace
def measure_known_answers(build_id: int) -> str:
    """Ask a build its collection's known answers after it committed; returns the report's status or
    "skipped"."""
    with task_scope(agent_id_of_build(build_id)):
        report = known_answers.measure_build(build_id=build_id)
    return report.status if report is not None else "skipped"


def sweep_sync() -> int:
    """Queue a check of every synced collection that is due; returns how many (spans agents: no scope).
    First drops this node's copies of sources no collection reads any more (a deletion on another node)."""
    origins.prune_copies()
    return len(sync.sweep_due())


@tracing.continues_trace
def check_collection_sync(collection_id: int) -> str:
    """Check one synced collection's folder and build it if something changed; returns what the check said."""
    with task_scope(agent_id_of_collection(collection_id)):
        collection = Collection.objects.select_related("agent").filter(pk=collection_id).first()
        return sync_check.check_source(collection=collection).outcome if collection is not None else "gone"


@tracing.continues_trace
def deliver_webhook(delivery_id: int) -> str:
    """One attempt at a webhook delivery; returns its status."""
    with task_scope(agent_id_of_delivery(delivery_id)):
        return webhooks.deliver(delivery_id=delivery_id)


def sweep_webhooks() -> int:
    """Queue the webhook deliveries whose backoff has passed; returns how many."""
    return len(webhooks.retry_due())


def purge_read_audit() -> int:
    """Delete the read-audit entries past AUDIT_RETENTION_DAYS; returns how many."""
    return audit.purge_reads()
