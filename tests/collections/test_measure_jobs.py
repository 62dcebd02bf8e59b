"""Measuring as a job: progress recorded while it runs, the stored report, bad input refused before
queueing, failures said and dead jobs swept, and a real qcluster running one."""

import pytest

from collections_app.services.agents import create_collection
from collections_app.services.measure import measure_collection
from ragsite.errors import RagsiteError
from tests.conftest import HANDBOOK

from .test_measure import CONTROLS, QUESTIONS

# --- Measuring as a job ---------------------------------------------------------------------------


def test_a_measure_job_records_progress_and_stores_its_report(handbook, django_capture_on_commit_callbacks):
    from collections_app.models import MeasureRun
    from collections_app.services.measure import request_measure

    with django_capture_on_commit_callbacks(execute=True):
        run = request_measure(
            collection=handbook, questions=QUESTIONS, controls=CONTROLS, requested_by="librarian"
        )
    run.refresh_from_db()
    assert run.status == MeasureRun.SUCCEEDED, run.error
    assert (
        run.variants_total
        == run.variants_done
        == len(run.report["variants"]) + len(run.report["skipped"])
        > 10
    )
    assert run.percent == 100 and run.report["questions"] == 3 and run.requested_by == "librarian"
    assert run.request["controls"] == CONTROLS


def test_a_measure_job_refuses_bad_input_before_it_is_queued(handbook):
    from collections_app.models import MeasureRun
    from collections_app.services.measure import request_measure

    with pytest.raises(RagsiteError, match="at least one question"):
        request_measure(collection=handbook, questions=[], controls=[])
    assert not MeasureRun.objects.exists()


def test_a_failed_measure_job_says_why_and_a_dead_one_is_swept(handbook, settings):
    from django.utils import timezone

    from collections_app.models import MeasureRun
    from collections_app.services.measure import fail_stale_measures, request_measure, run_measure

    run = request_measure(collection=handbook, questions=QUESTIONS, enqueue=False)
    settings.EMBED_BACKEND = "http"
    settings.EMBED_URL = "http://127.0.0.1:9/v1/embeddings"  # nothing listens: the embedder fails
    settings.EMBED_MODEL = "hash-64"
    run = run_measure(run.pk)
    assert run.status == MeasureRun.FAILED and run.error
    stale = request_measure(collection=handbook, questions=QUESTIONS, enqueue=False)
    MeasureRun.objects.filter(pk=stale.pk).update(
        status=MeasureRun.RUNNING, heartbeat_at=timezone.now() - timezone.timedelta(hours=1)
    )
    assert fail_stale_measures() == 1
    assert MeasureRun.objects.get(pk=stale.pk).status == MeasureRun.FAILED


@pytest.mark.qcluster
@pytest.mark.django_db(transaction=True)
def test_a_real_qcluster_runs_a_measure_job_to_its_stored_report(agent, knowledge_folder, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from django_q.conf import Conf

    from collections_app.models import MeasureRun
    from collections_app.services.measure import request_measure
    from tests.test_qcluster import ROOT, database_url

    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    folder = knowledge_folder("handbook", HANDBOOK)
    Conf.SYNC = False
    try:
        run = request_measure(collection=collection, questions=QUESTIONS, controls=CONTROLS)
    finally:
        Conf.SYNC = True
    assert MeasureRun.objects.get(pk=run.pk).status == MeasureRun.QUEUED  # queued, not run in the request
    env = {
        **os.environ,
        "DATABASE_URL": database_url(),
        "Q_WORKERS": "1",
        "EMBED_BACKEND": "hash",
        "KNOWLEDGE_ALPHA__HANDBOOK_FOLDER": str(folder),
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
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            run.refresh_from_db()
            if run.status in (MeasureRun.SUCCEEDED, MeasureRun.FAILED):
                break
            assert cluster.poll() is None, (tmp_path / "qcluster.log").read_text()[-2000:]
            time.sleep(0.5)
        assert run.status == MeasureRun.SUCCEEDED, (
            run.error or (tmp_path / "qcluster.log").read_text()[-2000:]
        )
        assert run.variants_done == run.variants_total > 10 and run.report["questions"] == len(QUESTIONS)
    finally:
        os.killpg(cluster.pid, signal.SIGTERM)
        try:
            cluster.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(cluster.pid, signal.SIGKILL)


def test_progress_beats_while_a_variant_embeds_not_only_between_variants(handbook, settings):
    settings.EMBED_BATCH_SIZE = 1
    beats = []
    report = measure_collection(
        collection=handbook, questions=QUESTIONS, progress=lambda done, total: beats.append(done)
    )
    variants = len(report["variants"]) + len(report["skipped"])
    assert beats[0] == 0 and beats[-1] == variants and beats == sorted(beats)
    assert len(beats) > variants + 1 + report["embedded"] - 1  # a beat per embedded batch as well
