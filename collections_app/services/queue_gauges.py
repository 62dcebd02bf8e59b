"""The task cluster's queue, read when /metrics is scraped: how many tasks wait in the broker, how long
the oldest queued build has waited, and whether a cluster is reporting (services.builds.status)."""

from __future__ import annotations

from django.db.models import Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from ..models import BuildRun
from .builds.status import worker_running


class TaskQueueCollector:
    """A prometheus-client collector: run in the scraping process, against the broker and the store."""

    def collect(self):
        depth = GaugeMetricFamily("ragsite_task_queue_depth", "Tasks waiting in the django-q2 broker.")
        depth.add_metric([], _queue_size())
        yield depth
        oldest = BuildRun.objects.filter(status=BuildRun.QUEUED).aggregate(first=Min("created_at"))["first"]
        age = GaugeMetricFamily(
            "ragsite_task_queue_oldest_build_seconds",
            "How long the oldest build still queued has waited (0: none queued).",
        )
        age.add_metric([], 0.0 if oldest is None else max(0.0, (timezone.now() - oldest).total_seconds()))
        yield age
        running = GaugeMetricFamily(
            "ragsite_task_cluster_up", "1 when a task cluster reported a heartbeat in the last seconds."
        )
        running.add_metric([], 1.0 if worker_running() else 0.0)
        yield running


def _queue_size() -> float:
    from django_q.brokers import get_broker

    try:
        return float(get_broker().queue_size() or 0)
    except Exception:  # an unreachable broker: the scrape still answers; ragsite_task_cluster_up says more
        return float("nan")
