"""`make run`'s processes, the task cluster (and the webhook cluster beside it) and the development
server, stopped together.

    python -m config.serve HOST:PORT [--summary FILE]

With `--summary FILE` (written by `manage.py demo --summary FILE`: the admin login and the key), the
lines of FILE are repeated in a box once the server answers, below the start-up lines they would
otherwise scroll away under, and FILE is deleted.

django-q2's cluster stops cleanly only when its main process alone is signalled: its sentinel and
workers die at once on SIGTERM, and the main process then waits forever on a lock the dead sentinel
held. SIGTERM sent to a whole process group (systemd, docker, `kill -- -PGID`) hung `make run` until
SIGKILL. So the cluster runs in a process group of its own, and this launcher, on SIGTERM, SIGINT
or the server's exit, signals the cluster's main process only and waits for it to stop (Ctrl-C in a
terminal arrives here as SIGINT and goes the same way).
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

# How long the cluster may take to finish a running task's current step before it is killed.
CLUSTER_STOP_SECONDS = 30


# How long the box waits for the server to answer, and then for the start-up lines to settle.
ANSWER_WAIT_SECONDS, SETTLE_SECONDS = 120, 1.5


def main(argv: list[str]) -> int:
    summary = ""
    if len(argv) == 3 and argv[1] == "--summary":
        argv, summary = argv[:1], argv[2]
    if len(argv) != 1:
        print("usage: python -m config.serve HOST:PORT [--summary FILE]", file=sys.stderr)
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
    if summary:
        threading.Thread(target=show_summary, args=(argv[0], Path(summary)), daemon=True).start()
    if stopping:  # asked to stop while the children were starting
        os.killpg(server.pid, stopping[0])
    status = server.wait()
    for cluster in clusters:
        stop_cluster(cluster)
    return 0 if stopping else status


def show_summary(address: str, path: Path) -> None:
    """Once the server answers, the summary's lines in a box on stderr; then the file goes."""
    host, _, port = address.rpartition(":")
    host = "127.0.0.1" if host in ("", "0.0.0.0", "[::]", "::") else host.strip("[]")
    deadline = time.monotonic() + ANSWER_WAIT_SECONDS
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                break
        except OSError:
            time.sleep(0.3)
    else:
        return
    time.sleep(SETTLE_SECONDS)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
        path.unlink()
    except OSError:
        return
    lines += [
        "Django's development-server warning above is expected: `make run` is for trying",
        'ragsite out (README, "Production shape", for serving). Ctrl-C stops everything.',
    ]
    print(boxed(lines), file=sys.stderr, flush=True)


def boxed(lines: list[str]) -> str:
    width = max(len(line) for line in lines)
    rule = "─" * (width + 2)
    return "\n".join([f"┌{rule}┐", *(f"│ {line.ljust(width)} │" for line in lines), f"└{rule}┘"])


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
