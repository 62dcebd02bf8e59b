"""Known answers with a real django-q2 cluster: the worker builds, and after the build commits it measures."""

import os
import signal
import subprocess
import sys
import time

import pytest

from collections_app.models import BuildRun, KnownAnswersReport
from collections_app.services import known_answers
from collections_app.services.agents import create_collection
from collections_app.services.builds import request_build
from tests.conftest import HANDBOOK
from tests.test_qcluster import ROOT, database_url

ITEMS = [
    {"question": "what is mileage reimbursed at per kilometre", "answer": "0.42 per kilometre"},
    {"question": "what is the recipe for sourdough bread", "control": True},
]


@pytest.mark.qcluster
@pytest.mark.django_db(transaction=True)
def test_a_build_in_the_worker_is_measured_after_it_commits(agent, knowledge_folder, tmp_path):
    from django_q.conf import Conf

    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK)
    known_answers.set_known_answers(collection=collection, items=ITEMS)
    Conf.SYNC = False
    try:
        run = request_build(collection=collection, requested_by="test")  # enqueued when this commits
    finally:
        Conf.SYNC = True
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "Q_WORKERS": "1",
        "LOG_LEVEL": "INFO",
        "EMBED_BACKEND": "hash",
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
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and not KnownAnswersReport.objects.filter(build=run).exists():
            assert cluster.poll() is None, log_path.read_text()[-2000:]
            time.sleep(0.3)
        report = KnownAnswersReport.objects.filter(build=run).first()
        assert report is not None, log_path.read_text()[-2000:]
        run.refresh_from_db()
        assert run.status == BuildRun.SUCCEEDED and report.measured_at >= run.finished_at
        assert (report.status, report.answers, report.controls) == ("measured", 1, 1)
        # The worker's log carries counts, never the librarian's questions or markers.
        logged = log_path.read_text()
        assert "known answers of build" in logged
        assert "mileage" not in logged and "0.42 per kilometre" not in logged
    finally:
        os.killpg(cluster.pid, signal.SIGTERM)
        try:
            cluster.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(cluster.pid, signal.SIGKILL)
