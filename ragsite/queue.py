"""Queueing a task on the django-q2 cluster, one way for every caller.

Every queued task carries the queueing request's trace context in its arguments
(docs/decisions/0082), so the worker's span continues the request's trace; a caller that
queued by hand could forget it and break the trace without any test noticing.
"""

from __future__ import annotations

from . import tracing


def enqueue(task: str, *args, name: str, cluster: str | None = None) -> None:
    """Queue `task` (a dotted path) with `args` under the task name `name`; `cluster` None is the main
    cluster. The current trace, if any, travels as the task's `trace` argument."""
    from django_q.tasks import async_task

    async_task(task, *args, trace=tracing.carrier(), task_name=name, cluster=cluster)
