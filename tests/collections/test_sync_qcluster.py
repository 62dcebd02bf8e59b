"""Issue 26 end to end with a real django-q2 cluster: a synced folder keeps its collection current with no
click, and a webhook receiver on 127.0.0.1 gets every event once, signed, a failed attempt retried."""

import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest

from collections_app.models import BuildRun, Webhook, WebhookDelivery
from collections_app.schedules import SWEEP_MINUTES, ensure_schedules
from collections_app.services import known_answers, sync
from collections_app.services.agents import create_collection
from collections_app.services.builds import request_build
from collections_app.services.search import search_collection
from ragsite.errors import Conflict
from tests.collections.test_webhooks import verified
from tests.conftest import HANDBOOK
from tests.servers import WebhookReceiver, serving
from tests.test_qcluster import ROOT, database_url

PERIOD_MINUTES = 1
# A change is seen by the first sweep at or after the collection's next check: one period, plus the sweep's
# own cycle (a django-q2 schedule every SWEEP_MINUTES, which the scheduler polls every 30 s), plus the build.
WITHIN = PERIOD_MINUTES * 60 + SWEEP_MINUTES * 60 + 30 + 60


def text_of(collection, question: str) -> str:
    """What a search returns, as one text; "" while the collection was never built."""
    try:
        answer = search_collection(
            agent=collection.agent, collection=collection, question=question, min_score=0, most=10
        )
    except Conflict:
        return ""
    return " ".join(p["text"] for p in answer["paragraphs"])


def wait_for(condition, seconds: float, cluster, log_path, what: str):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert cluster.poll() is None, log_path.read_text()[-3000:]
        if condition():
            return time.monotonic()
        time.sleep(0.5)
    raise AssertionError(f"{what} did not happen within {seconds} s\n" + log_path.read_text()[-3000:])


def enqueue_build(collection) -> BuildRun:
    from django_q.conf import Conf

    Conf.SYNC = False
    try:
        return request_build(collection=collection, requested_by="test")
    finally:
        Conf.SYNC = True


@pytest.mark.qcluster
@pytest.mark.django_db(transaction=True)
def test_a_synced_folder_and_its_webhooks_through_a_real_cluster(agent, knowledge_folder, tmp_path, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    # One cluster serves builds and deliveries here (an empty WEBHOOK_QUEUE); test_qcluster runs the two.
    settings.WEBHOOK_QUEUE = ""
    folder = knowledge_folder("handbook", HANDBOOK)
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    known_answers.set_known_answers(
        collection=collection,
        items=[{"question": "what is mileage reimbursed at per kilometre", "answer": "0.42 per kilometre"}],
    )
    ensure_schedules()  # the suite's transactional tests flush the rows migrate made
    with serving(WebhookReceiver(statuses=[500])) as receiver:
        hook = Webhook.objects.create(agent=agent, url=receiver.url + "/ragsite", events=list(Webhook.EVENTS))
        sync.set_sync(collection=collection, every=PERIOD_MINUTES)
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "Q_WORKERS": "2",
            "LOG_LEVEL": "INFO",
            "EMBED_BACKEND": "hash",
            "DATA_DIR": str(tmp_path),
            "INDEX_DIR": str(settings.INDEX_DIR),
            "KNOWN_ANSWERS_GATE": "0",
            "WEBHOOK_ALLOW_PRIVATE": "true",
            "WEBHOOK_QUEUE": "",
        }
        log_path = tmp_path / "qcluster.log"
        cluster = subprocess.Popen(
            [sys.executable, "manage.py", "qcluster"],
            cwd=ROOT,
            env=env,
            stdout=log_path.open("w+"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            # The first check finds the collection never built and builds it, with no click.
            wait_for(
                lambda: "0.42 per kilometre" in text_of(collection, "mileage per kilometre"),
                WITHIN + 60,
                cluster,
                log_path,
                "the first sync build",
            )

            # A file dropped in, one changed and one deleted: seen within one period, in one build.
            (folder / "canteen.md").write_text("# Canteen\n\nThe canteen serves lunch from noon until two.\n")
            (folder / "leave.md").write_text(
                "# Leave\n\nCarry-over of annual leave is capped at eight days.\n"
            )
            (folder / "security.md").unlink()
            changed_at = time.monotonic()
            seen_at = wait_for(
                lambda: (
                    "noon until two" in text_of(collection, "when does the canteen serve lunch")
                    and "eight days" in text_of(collection, "annual leave carry-over capped")
                    and "encryption" not in text_of(collection, "laptops full-disk encryption")
                ),
                WITHIN,
                cluster,
                log_path,
                "the changes",
            )
            assert seen_at - changed_at <= WITHIN
            leave = text_of(collection, "annual leave carry-over capped")
            assert "five days" not in leave
            runs = list(collection.runs.order_by("id").values_list("requested_by", "status"))
            assert runs == [
                ("sync", "succeeded"),
                ("sync", "succeeded"),
            ]  # nothing built while nothing changed

            # Sync off; a build that loses the known answer is refused (the old build answers on), then one
            # that fails, both asked for by hand and carried out by the cluster.
            sync.set_sync(collection=collection, every=None)
            (folder / "travel.md").write_text("# Travel\n\nTrains are booked in standard class.\n")
            # Written whole a while ago: a build reads only files that stood still (SYNC_SETTLE_SECONDS).
            settled = time.time() - 60
            os.utime(folder / "travel.md", (settled, settled))
            refused = enqueue_build(collection)
            wait_for(
                lambda: BuildRun.objects.get(pk=refused.pk).status == BuildRun.REFUSED,
                90,
                cluster,
                log_path,
                "the refusal",
            )
            assert "0.42 per kilometre" in text_of(collection, "mileage per kilometre")
            for path in folder.iterdir():
                path.unlink()
            failed = enqueue_build(collection)
            wait_for(
                lambda: BuildRun.objects.get(pk=failed.pk).status == BuildRun.FAILED,
                90,
                cluster,
                log_path,
                "the failure",
            )

            # Every delivery arrives; the first, answered 500, is retried by the webhook sweep.
            wait_for(
                lambda: (
                    WebhookDelivery.objects.count() == 5
                    and not WebhookDelivery.objects.exclude(status=WebhookDelivery.DELIVERED).exists()
                ),
                180,
                cluster,
                log_path,
                "every delivery",
            )
        finally:
            os.killpg(cluster.pid, signal.SIGTERM)
            try:
                cluster.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(cluster.pid, signal.SIGKILL)
    received = []
    for request in receiver.requests:
        received.append(verified(request, hook.secret))  # as a receiver checks it (docs/webhooks.md)
    # Six requests: five deliveries, the first sent twice (its first attempt answered 500).
    assert len(received) == 6 and received[0] == received[1]
    delivered = {payload["id"]: payload["event"] for payload in received}
    assert Counter(delivered.values()) == {
        "build.succeeded": 2,
        "build.refused": 1,
        "known_answers.lost": 1,
        "build.failed": 1,
    }
    first = WebhookDelivery.objects.order_by("id").first()
    assert (first.attempts, first.status) == (2, "delivered")
    assert sorted(WebhookDelivery.objects.values_list("attempts", flat=True)) == [1, 1, 1, 1, 2]
    raw = b" ".join(r["body"] for r in receiver.requests).decode()
    assert str(folder) not in raw and "mileage" not in raw.lower() and "canteen" not in raw
