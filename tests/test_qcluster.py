"""A real django-q2 cluster, in its own process, picks up a task and finishes it."""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.db import connection

from collections_app.services.builds.status import worker_running

ROOT = Path(__file__).resolve().parents[1]


def database_url() -> str:
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    return f"postgres://{s['USER'] or ''}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


@pytest.mark.qcluster
@pytest.mark.django_db(transaction=True)
def test_a_real_qcluster_runs_an_enqueued_task(tmp_path):
    from django_q.conf import Conf
    from django_q.models import Success
    from django_q.tasks import async_task

    Conf.SYNC = False
    try:
        task_id = async_task("collections_app.tasks.sweep_stale_builds")
    finally:
        Conf.SYNC = True
    # With DATA_DIR here the cluster's heartbeats land in tmp_path/task-cluster, where the
    # suite's conftest points this process's `task_cluster` cache.
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "Q_WORKERS": "1",
        "LOG_LEVEL": "INFO",
        "DATA_DIR": str(tmp_path),
    }
    log = (tmp_path / "qcluster.log").open("w+")
    cluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not Success.objects.filter(id=task_id).exists():
            assert cluster.poll() is None, (tmp_path / "qcluster.log").read_text()[-2000:]
            time.sleep(0.3)
        done = Success.objects.filter(id=task_id).first()
        assert done is not None, (tmp_path / "qcluster.log").read_text()[-2000:]
        assert done.result == 0  # no stale builds to sweep
        # The web process sees the cluster's heartbeat (what "no task worker is running" is based on).
        assert worker_running()
    finally:
        os.killpg(cluster.pid, signal.SIGTERM)
        try:
            cluster.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(cluster.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while worker_running() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not worker_running()  # the heartbeat expires within seconds of the cluster stopping


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.qcluster
@pytest.mark.django_db(transaction=True)
def test_sigterm_to_the_clusters_process_group_stops_every_process_within_10_s(tmp_path):
    """systemd and docker stop a service by signalling its whole group: the sentinel and workers die at
    once, and django-q2's main process used to wait forever for the dead sentinel."""
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "Q_WORKERS": "2",
        "LOG_LEVEL": "INFO",
        "DATA_DIR": str(tmp_path),
    }
    log_path = tmp_path / "qcluster.log"
    cluster = subprocess.Popen(
        [sys.executable, "manage.py", "qcluster"],
        cwd=ROOT,
        env=env,
        stdout=log_path.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 90
        while "running." not in log_path.read_text() and time.monotonic() < deadline:
            assert cluster.poll() is None, log_path.read_text()[-2000:]
            time.sleep(0.3)
        time.sleep(2)  # the sentinel asleep in its wait on the stop event, where the hang began
        members = subprocess.run(
            ["ps", "-o", "pid=", "-g", str(cluster.pid)], capture_output=True, text=True
        ).stdout.split()
        assert len(members) >= 4, members  # main, sentinel, monitor, pusher, workers
        os.killpg(cluster.pid, signal.SIGTERM)
        stopped_by = time.monotonic() + 10
        while time.monotonic() < stopped_by:
            cluster.poll()  # reap the main process once it exits
            if not group_alive(cluster.pid):
                break
            time.sleep(0.2)
        assert not group_alive(cluster.pid), subprocess.run(
            ["ps", "-o", "pid,stat,cmd", "-g", str(cluster.pid)], capture_output=True, text=True
        ).stdout
    finally:
        if group_alive(cluster.pid):
            os.killpg(cluster.pid, signal.SIGKILL)
        cluster.wait(timeout=10)


@pytest.mark.qcluster
@pytest.mark.django_db(transaction=True)
def test_webhook_deliveries_are_taken_by_their_own_cluster_only(tmp_path, settings):
    """A delivery queued while only the build cluster runs waits; the webhook cluster (Q_CLUSTER_NAME =
    WEBHOOK_QUEUE) sends it. So a slow receiver can hold a webhook worker, never a build's."""
    from django_q.conf import Conf

    from collections_app.models import Webhook, WebhookDelivery
    from collections_app.services import webhooks
    from collections_app.services.agents import create_agent
    from tests.servers import WebhookReceiver, serving

    agent, _raw = create_agent(agent_id="hooked")
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "Q_WORKERS": "1",
        "DATA_DIR": str(tmp_path),
        "WEBHOOK_ALLOW_PRIVATE": "true",
    }
    with serving(WebhookReceiver()) as receiver:
        hook = Webhook.objects.create(agent=agent, url=receiver.url, events=["build.succeeded"])
        delivery = WebhookDelivery.objects.create(webhook=hook, event="build.succeeded", payload={"a": 1})
        Conf.SYNC = False
        try:
            webhooks._enqueue(delivery.pk)
        finally:
            Conf.SYNC = True
        started = []
        try:
            for name in ("", settings.WEBHOOK_QUEUE):
                log = (tmp_path / f"qcluster{name}.log").open("w+")
                started.append(
                    subprocess.Popen(
                        [sys.executable, "manage.py", "qcluster"],
                        cwd=ROOT,
                        env={**env, "Q_CLUSTER_NAME": name} if name else env,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
                if not name:  # the build cluster alone, for a while: it leaves the delivery be
                    time.sleep(6)
                    assert receiver.requests == []
                    assert WebhookDelivery.objects.get(pk=delivery.pk).status == "pending"
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not receiver.requests:
                time.sleep(0.3)
            assert len(receiver.requests) == 1, (
                tmp_path / f"qcluster{settings.WEBHOOK_QUEUE}.log"
            ).read_text()
        finally:
            for cluster in started:
                os.killpg(cluster.pid, signal.SIGTERM)
                try:
                    cluster.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    os.killpg(cluster.pid, signal.SIGKILL)
