"""`make run`'s launcher (config/serve.py): SIGTERM to its process group stops the server and the cluster.

django-q2's cluster hung after "stopping." (3 of 3 tries) when its sentinel and workers got the
group's SIGTERM too; systemd and docker stop a service that way.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from collections_app.services.builds.status import worker_running

from .test_qcluster import ROOT, database_url


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes_with(marker: str) -> list[int]:
    """Every live process whose environment carries `marker` (this test's DATA_DIR)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in environ and state != "Z":
            found.append(int(entry.name))
    return found


def wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


# The launcher starts with SIGINT as a terminal leaves it (default) or as a script's `cmd &` does
# (ignored: no job control), whatever the test runner itself was started with.
START_WITH_SIGINT = (
    "import os, signal, sys; signal.signal(signal.SIGINT, getattr(signal, sys.argv[1])); "
    "os.execv(sys.argv[2], sys.argv[2:])"
)


@pytest.mark.qcluster
@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="reads /proc to find the processes")
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("signum", "sigint_at_start"),
    [(signal.SIGTERM, "SIG_DFL"), (signal.SIGINT, "SIG_DFL"), (signal.SIGINT, "SIG_IGN")],
    ids=["SIGTERM", "SIGINT", "SIGINT-to-a-background-job"],
)
def test_a_signal_to_the_process_group_stops_the_server_and_the_task_cluster(
    tmp_path, signum, sigint_at_start
):
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url(), "Q_WORKERS": "1", "DATA_DIR": str(tmp_path)}
    log = (tmp_path / "serve.log").open("w+")
    # Started with SIGINT ignored, the server ignored the SIGINT the launcher passed on and never stopped.
    command = [sys.executable, "-c", START_WITH_SIGINT, sigint_at_start, sys.executable]
    summary = tmp_path / "start-up-summary.txt"
    summary.write_text('Admin:    http://127.0.0.1/admin/  user "admin", password (shown once): pw-123\n')
    command += ["-m", "config.serve", f"127.0.0.1:{port}", "--summary", str(summary)]
    launcher = subprocess.Popen(
        command,
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:

        def answering():
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", port)) == 0

        assert wait_until(lambda: answering() and worker_running(), 90), (
            log.name and Path(log.name).read_text()
        )
        assert len(processes_with(str(tmp_path))) >= 4  # launcher, server, cluster, its sentinel and worker
        # The login, repeated in a box below the start-up lines once the server answers; then gone.
        assert wait_until(lambda: not summary.exists(), 15), Path(log.name).read_text()
        shown = Path(log.name).read_text()
        assert "│ Admin:    http://127.0.0.1/admin/" in shown and "pw-123" in shown
        assert shown.rindex("pw-123") > shown.index("Quit the server with")
        os.killpg(launcher.pid, signum)  # as systemd, docker or a terminal's Ctrl-C would
        launcher.wait(timeout=45)
        assert wait_until(lambda: not processes_with(str(tmp_path)), 10), Path(log.name).read_text()[-3000:]
        assert launcher.returncode == 0
        assert "has stopped" in Path(log.name).read_text()  # the cluster's own clean stop, not a kill
    finally:
        for pid in processes_with(str(tmp_path)):
            os.kill(pid, signal.SIGKILL)
