"""gunicorn's configuration for the web tier: `gunicorn -c python:config.gunicorn_conf`.

The application is loaded and warmed in the master, then forked into `WEB_CONCURRENCY` workers,
so that the Python heap, Django, the URLconf and the local model's state are built once and
shared by every worker page by page (config/prefork.py; figures in docs/decisions/0030). Each
worker serves `WEB_THREADS` requests at once (gthread): an MCP `build_status` with `wait_seconds`
holds its thread for up to a minute, and the other threads go on answering. Anything else of
gunicorn's can still be given on its command line or in GUNICORN_CMD_ARGS, which win over this.
"""

import os

from django.core.exceptions import ImproperlyConfigured

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from config import prefork  # noqa: E402  (after the settings module is named)
from ragsite.conf import settings  # noqa: E402


def _at_least_one(name: str) -> int:
    value = int(getattr(settings, name))
    if value < 1:
        raise ImproperlyConfigured(f"{name} must be at least 1, not {value}")
    return value


wsgi_app = "config.wsgi:application"
bind = [str(settings.WEB_BIND)]
workers = _at_least_one("WEB_CONCURRENCY")
threads = _at_least_one("WEB_THREADS")
worker_class = "gthread"
# Load the application in the master before forking: what the master builds, workers share.
preload_app = True
# gunicorn's control socket has one default path per user ($XDG_RUNTIME_DIR or ~/.gunicorn), which
# a second server on the machine would take over, and it runs an asyncio thread in the master that
# every later fork (a replaced worker) would cross.
control_socket_disable = True


def on_starting(server):
    """Before the master binds its socket: every live build's index fetched and verified into INDEX_DIR
    (services.indexes.warm), so no worker's first searches wait for a load. Nothing listens yet, so a
    load balancer sends this node no traffic until it is done."""
    import django
    from django.apps import apps

    if not apps.ready:  # preload_app loaded it already
        django.setup()
    from django.db import DatabaseError

    from collections_app.services.indexes.warm import warm_indexes

    try:
        warmed = warm_indexes()
    except DatabaseError as exc:  # a store not migrated or not reachable yet: searches load on demand
        server.log.warning("search indexes not warmed: %s", type(exc).__name__)
        return
    outcomes = sorted({item.outcome for item in warmed})
    summary = ", ".join(f"{sum(i.outcome == o for i in warmed)} {o}" for o in outcomes) or "none built"
    server.log.info("search indexes warmed before binding: %s", summary)


def when_ready(server):
    """The master has loaded the application and bound its socket; no worker is forked yet."""
    if not server.cfg.preload_app:  # each worker loads the application itself: nothing to share
        return
    steps = prefork.warm()
    server.log.info("warmed before forking: %s", ", ".join(steps))


def pre_fork(server, worker):
    prefork.before_fork()


def post_fork(server, worker):
    """In the new worker, before it starts its threads."""
    prefork.after_fork()


def child_exit(server, worker):
    """A worker is gone: under PROMETHEUS_MULTIPROC_DIR its per-process gauges leave the scrape (its
    counters stay in the sums, as they must)."""
    from ragsite.instruments import process_exited

    process_exited(worker.pid)
