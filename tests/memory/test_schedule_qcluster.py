"""The scheduled health repair, run by a real django-q2 cluster in its own process.

A long memory is stored while the task queue is down, so its nodes are never built. The repair
schedule (made by `setup_schedules`) is made due, and a real `manage.py qcluster` picks it up:
its scheduler (which looks for due schedules about every 30 s) queues `repair_record_nodes`, a
worker builds the memory's nodes, and the run is recorded as a success. On SQLite the broker is
the ORM; with `REDIS_URL` set it is Redis.
"""

import os
import signal
import subprocess
import sys
import time
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.utils import timezone

from memory_app import services
from memory_app.models import MEMORY, RecordNode
from memory_app.nodes import divide_record, runs_past_window
from memory_app.schedules import HEALTH_REPAIR, HEALTH_REPAIR_FUNC
from ragsite import embedding
from tests.test_qcluster import ROOT, database_url

from .conftest import prose

# django-q2's guard first looks for due schedules after 60 of its half-second cycles, each cycle's own work
# on top, and only once the cluster has started: 55 s of the old 60 s bound at load ~5.6 on two cores.
# Three times that: the test is that the scheduled run happens, not how soon.
DEADLINE_SECONDS = 180


@pytest.fixture
def embedder(settings):
    """The embedder the cluster will use too: `EMBED_BACKEND=hash` as configured, not the small-window one.

    Overrides the memory tests' autouse fixture, which patches a 40-token embedder into this
    process only; the subprocess builds its own from the environment.
    """
    settings.EMBED_BACKEND = "hash"
    return embedding.get_embedder()


@pytest.mark.qcluster
@pytest.mark.django_db(transaction=True)
def test_a_real_qcluster_runs_the_scheduled_repair_and_builds_missing_nodes(
    agent, embedder, monkeypatch, tmp_path
):
    from django_q.models import Schedule, Success

    # setup_schedules is idempotent: twice leaves one schedule.
    call_command("setup_schedules", verbosity=0)
    call_command("setup_schedules", verbosity=0)
    assert Schedule.objects.filter(name=HEALTH_REPAIR).count() == 1
    schedule = Schedule.objects.get(name=HEALTH_REPAIR)
    assert schedule.func == HEALTH_REPAIR_FUNC

    # A long memory stored while the broker is down: the store answers, its node build is lost.
    def broker_down(*args, **kwargs):
        raise ConnectionError("the broker is down")

    text = prose(700, seed=11)  # the configured hash embedder's window is 256 tokens: words plus 2
    with monkeypatch.context() as patched:
        patched.setattr("django_q.tasks.async_task", broker_down)
        memory, nodes = services.store_memory(agent=agent, text=text)
    assert nodes == {"status": "queued"}
    assert embedder.window and runs_past_window(memory.token_count, embedder.window)
    assert memory.embedding_model == embedder.model
    assert not RecordNode.objects.filter(parent_kind=MEMORY, parent_id=memory.pk).exists()
    assert services.check_health()["missing_nodes"] == 1

    # Due now.
    Schedule.objects.filter(pk=schedule.pk).update(next_run=timezone.now() - timedelta(minutes=1))

    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "EMBED_BACKEND": "hash",
        "Q_WORKERS": "1",
        "LOG_LEVEL": "INFO",
    }
    log_path = tmp_path / "qcluster.log"
    log = log_path.open("w+")
    cluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + DEADLINE_SECONDS
        done = None
        while time.monotonic() < deadline:
            assert cluster.poll() is None, log_path.read_text()[-2000:]
            task_id = Schedule.objects.filter(pk=schedule.pk).values_list("task", flat=True).first()
            done = Success.objects.filter(id=task_id).first() if task_id else None
            if done is not None:
                break
            time.sleep(0.5)
        assert done is not None, (
            f"no successful scheduled run within {DEADLINE_SECONDS} s:\n" + log_path.read_text()[-3000:]
        )
    finally:
        os.killpg(cluster.pid, signal.SIGTERM)
        try:
            cluster.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(cluster.pid, signal.SIGKILL)
        log.close()

    assert done.func == HEALTH_REPAIR_FUNC and done.group == HEALTH_REPAIR
    assert done.result == {"missing_nodes": 1, "repaired": 1, "remaining": 0, "missing_triggers": []}
    schedule.refresh_from_db()
    assert schedule.next_run > timezone.now()  # the scheduler moved it on
    # The nodes the cluster built are the ones this process's embedder would build.
    nodes = services.record_nodes(MEMORY, memory.pk)
    assert len(nodes) >= 3
    assert [(n.start_char, n.end_char) for n in nodes] == [
        (span.start, span.end) for span in divide_record(text, embedder).spans
    ]
    assert nodes[0].start_char == 0 and nodes[-1].end_char == len(text)
    assert all(n.window == embedder.window and n.token_count <= embedder.window for n in nodes)
    assert {n.embedding_model for n in nodes} == {embedder.model}
    assert services.check_health()["missing_nodes"] == 0
