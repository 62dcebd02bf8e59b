"""Prometheus instruments: every metric ragsite exports, declared once, and their exposition.

The apps count into these where the work happens (a search, a build, a sync check, a delivery, a model
call); `config/metrics.py` serves them at `GET /metrics`. Labels are bounded vocabularies only: route
patterns, methods, statuses, modes, outcomes, purposes and model names; never a question, a text, a
reader, an agent's input or a path.

Under gunicorn's several workers (and the task cluster's) each process writes its values to files in
`PROMETHEUS_MULTIPROC_DIR` (prometheus-client's multiprocess mode, chosen by that environment variable
when the library is first imported); the scrape sums them. Without it the process's own registry
answers, which is right for a single process (runserver, tests).
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from prometheus_client import REGISTRY as PROCESS_REGISTRY
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess

MULTIPROC_VARIABLE = "PROMETHEUS_MULTIPROC_DIR"

# Requests take milliseconds (a search) to a minute (a build_status wait).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
BUILD_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600)

REQUESTS = Counter(
    "ragsite_http_requests",
    "HTTP requests answered, by route pattern, method and status.",
    ["route", "method", "status"],
)
REQUEST_SECONDS = Histogram(
    "ragsite_http_request_seconds",
    "Time to answer an HTTP request, by route pattern and method.",
    ["route", "method"],
    buckets=LATENCY_BUCKETS,
)
READS = Counter(
    "ragsite_reads",
    "Reads that answered stored text (the read audit's entries), by kind, channel and status.",
    ["kind", "channel", "status"],
)
SEARCHES = Counter("ragsite_searches", "Collection searches answered, by ranking mode.", ["mode"])
RECALLS = Counter("ragsite_recalls", "Memory recalls answered, by ranking mode.", ["mode"])
BUILDS = Counter("ragsite_builds", "Builds finished, by outcome.", ["outcome"])
BUILD_SECONDS = Histogram(
    "ragsite_build_seconds",
    "Wall time of a build from its start, by outcome.",
    ["outcome"],
    buckets=BUILD_BUCKETS,
)
DOCUMENTS = Counter(
    "ragsite_build_documents",
    "Documents builds went through, by what became of them: read, reused, refused.",
    ["outcome"],
)
OCR_PAGES = Counter("ragsite_ocr_pages", "Pages builds read by OCR.")
EMBEDDED = Counter("ragsite_embedded_texts", "Texts embedded, by purpose: build or question.", ["purpose"])
EMBED_SECONDS = Counter(
    "ragsite_embedding_seconds",
    "Seconds spent embedding, by purpose (texts / seconds: the throughput).",
    ["purpose"],
)
SYNC_CHECKS = Counter(
    "ragsite_sync_checks",
    "Checks of synced folders, by outcome: unchanged, queued, waiting, not_queued, unreadable or failed.",
    ["outcome"],
)
WEBHOOK_DELIVERIES = Counter(
    "ragsite_webhook_attempts",
    "Webhook delivery attempts, by outcome: delivered, retrying, failed.",
    ["outcome"],
)
MODEL_CALLS = Counter("ragsite_model_calls", "Model calls charged to the ledger.", ["purpose", "model"])
MODEL_TOKENS = Counter(
    "ragsite_model_tokens", "Tokens of model calls, by purpose and direction.", ["purpose", "direction"]
)
MODEL_COST = Counter("ragsite_model_cost", "Cost of model calls at MODEL_PRICES, by purpose.", ["purpose"])
# Per process: under the multiprocess mode one series per live process (its pid as a label).
INDEX_BYTES = Gauge(
    "ragsite_index_mapped_bytes",
    "Bytes of the search indexes this process has mapped.",
    multiprocess_mode="liveall",
)
INDEXES_MAPPED = Gauge(
    "ragsite_indexes_mapped", "Collections whose index this process has mapped.", multiprocess_mode="liveall"
)


def multiprocess_dir() -> str:
    return os.environ.get(MULTIPROC_VARIABLE, "")


def exposition(collectors: Iterable = ()) -> bytes:
    """The text format of every metric: the files of every process in the multiprocess mode, else this
    process's registry; `collectors` (read at the scrape, such as the task queue's) are added."""
    if multiprocess_dir():
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = CollectorRegistry()
        registry.register(_Registered())
    for collector in collectors:
        registry.register(collector)
    return generate_latest(registry)


class _Registered:
    """This process's own registry, wrapped so that scrape-time collectors join a fresh registry."""

    def collect(self):
        return PROCESS_REGISTRY.collect()


def process_exited(pid: int) -> None:
    """A worker is gone: its per-process gauges leave the scrape (gunicorn's child_exit)."""
    if multiprocess_dir():
        multiprocess.mark_process_dead(pid)
