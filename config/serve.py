"""`make run`'s processes, the task cluster (and the webhook cluster beside it) and the development
server, stopped together.

    python -m config.serve HOST:PORT

django-q2's cluster stops cleanly only when its main process alone is signalled: its sentinel and
workers die at once on SIGTERM, and the main process then waits forever on a lock the dead sentinel
held. SIGTERM sent to a whole process group (systemd, docker, `kill -- -PGID`) hung `make run` until
SIGKILL. So the cluster runs in a process group of its own, and this launcher, on SIGTERM, SIGINT
or the server's exit, signals the cluster's main process only and waits for it to stop (Ctrl-C in a
terminal arrives here as SIGINT and goes the same way).
"""

import os
import signal
import subprocess
import sys
import time

# How long the cluster may take to finish a running task's current step before it is killed.
CLUSTER_STOP_SECONDS = 30


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m config.serve HOST:PORT", file=sys.stderr)
        return 2
    manage = [sys.executable, "manage.py"]
    stopping: list[int] = []
    children: dict[str, subprocess.Popen] = {}

    def stop(signum, _frame):
        stopping.append(signum)
        server = children.get("server")
        if server is not None and server.poll() is None:
            os.killpg(server.pid, signum)

    # The handlers come first. A child inherits the signals this process ignores: started from a
    # background job (where SIGINT is ignored), the server ignored the SIGINT passed on to it and
    # never stopped; a signal with a handler here is back to its default in a child. And a signal
    # between the first start and the handlers killed this process alone, leaving both children running.
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    # Each in a process group of its own: a signal to ours reaches neither the cluster's sentinel and
    # workers nor the server's autoreloader child directly; this process passes it on.
    clusters = [subprocess.Popen([*manage, "qcluster"], process_group=0)]
    queue = webhook_queue()
    if queue:  # deliveries' own small cluster (WEBHOOK_QUEUE), so a slow receiver never holds a build
        env = {**os.environ, "Q_CLUSTER_NAME": queue}
        clusters.append(subprocess.Popen([*manage, "qcluster"], process_group=0, env=env))
    server = children["server"] = subprocess.Popen([*manage, "runserver", argv[0]], process_group=0)
    if stopping:  # asked to stop while the children were starting
        os.killpg(server.pid, stopping[0])
    status = server.wait()
    for cluster in clusters:
        stop_cluster(cluster)
    return 0 if stopping else status


def webhook_queue() -> str:
    """WEBHOOK_QUEUE as the settings read it (from the environment or .env)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.conf import settings

    return settings.WEBHOOK_QUEUE


def stop_cluster(cluster: subprocess.Popen) -> None:
    """SIGTERM to the cluster's main process (which stops its sentinel and workers), then wait."""
    if cluster.poll() is not None:
        return
    cluster.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + CLUSTER_STOP_SECONDS
    while cluster.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    if cluster.poll() is None:
        print(f"the task cluster did not stop within {CLUSTER_STOP_SECONDS} s; killing it", file=sys.stderr)
        os.killpg(cluster.pid, signal.SIGKILL)
        cluster.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
