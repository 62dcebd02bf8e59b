"""Webhook deliveries bounded: one deadline per attempt (a receiver trickling bytes on loopback), their own
queue, exactly-once attempt bookkeeping, headers under the signature, every special-purpose address
refused, and secrets sealed at rest (with the migration that seals those written before)."""

import socket
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from collections_app.models import Webhook, WebhookDelivery
from collections_app.services import webhooks
from collections_app.services.webhooks.transport import public
from tests.collections.test_webhooks import verified
from tests.servers import WebhookReceiver, serving

pytestmark = pytest.mark.django_db


class Trickler:
    """A receiver that answers a status line and then one byte every `every` seconds, for a long time."""

    def __init__(self, every=0.3):
        self.every, self.stop, self.served = every, threading.Event(), 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        self.listener.settimeout(0.2)
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                continue
            self.served += 1
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn):
        try:
            conn.recv(65536)
            conn.sendall(b"HTTP/1.1 200 OK\r\n")
            for _ in range(1000):
                if self.stop.wait(self.every):
                    break
                conn.sendall(b"X")
        except OSError:
            pass
        finally:
            conn.close()

    def close(self):
        self.stop.set()
        self.listener.close()


@pytest.fixture
def hook_to(agent, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True

    def make(url, events=(Webhook.BUILD_SUCCEEDED,)):
        return Webhook.objects.create(agent=agent, url=url, events=list(events))

    return make


def _delivery(hook) -> WebhookDelivery:
    now = timezone.now()
    return WebhookDelivery.objects.create(
        webhook=hook, event=Webhook.BUILD_SUCCEEDED, payload={"event": "build.succeeded"}, next_attempt_at=now
    )


def test_a_trickling_receiver_is_cut_at_the_attempts_deadline(hook_to, settings):
    settings.WEBHOOK_TIMEOUT = 1.5  # each byte comes well inside it; the whole answer never would
    trickler = Trickler(every=0.3)
    try:
        delivery = _delivery(hook_to(trickler.url))
        started = time.monotonic()
        assert webhooks.deliver(delivery_id=delivery.pk) == "pending"
        took = time.monotonic() - started
    finally:
        trickler.close()
    assert took < settings.WEBHOOK_TIMEOUT + 3, took  # the deadline, with room for a busy machine
    delivery.refresh_from_db()
    assert "did not answer within 1.5 s" in delivery.last_error and delivery.attempts == 1


def test_deliveries_go_on_their_own_queue(hook_to, settings, monkeypatch):
    from django_q.conf import Conf
    from django_q.models import OrmQ

    if Conf.ORM is None:
        pytest.skip("the ORM broker shows its queue's key; a Redis broker does too, elsewhere")
    delivery = _delivery(hook_to("http://127.0.0.1:9/"))
    monkeypatch.setattr(Conf, "SYNC", False)
    webhooks._enqueue(delivery.pk)
    assert OrmQ.objects.filter(key=settings.WEBHOOK_QUEUE).count() == 1
    assert not OrmQ.objects.exclude(key=settings.WEBHOOK_QUEUE).exists()
    assert settings.Q_CLUSTER["ALT_CLUSTERS"][settings.WEBHOOK_QUEUE]["workers"] == settings.WEBHOOK_WORKERS
    # The sweep waits past that cluster's kill timeout before taking a "sending" attempt for dead.
    assert webhooks.attempt_bound() > settings.Q_CLUSTER["ALT_CLUSTERS"][settings.WEBHOOK_QUEUE]["timeout"]


def test_the_sweep_never_requeues_a_live_attempt_and_a_late_one_records_nothing(hook_to, settings):
    with serving(WebhookReceiver()) as receiver:
        delivery = _delivery(hook_to(receiver.url))
        # An attempt in flight (claimed a little while ago, longer than the old 3 x timeout + 60 s).
        claimed = timezone.now() - timedelta(seconds=float(settings.WEBHOOK_TIMEOUT) * 3 + 61)
        WebhookDelivery.objects.filter(pk=delivery.pk).update(status="sending", last_attempt_at=claimed)
        assert webhooks.retry_due() == []
        assert WebhookDelivery.objects.get(pk=delivery.pk).status == "sending"
        # Past the bound it is dead: put back and sent once.
        dead = timezone.now() - timedelta(seconds=webhooks.attempt_bound() + 1)
        WebhookDelivery.objects.filter(pk=delivery.pk).update(last_attempt_at=dead)
        assert webhooks.retry_due() == [delivery.pk]
        assert webhooks.deliver(delivery_id=delivery.pk) == "delivered"
        assert webhooks.deliver(delivery_id=delivery.pk) == "delivered" and len(receiver.requests) == 1


def test_an_attempt_that_lost_its_claim_records_nothing(hook_to, monkeypatch):
    from collections_app.services.webhooks import transport as webhook_transport

    with serving(WebhookReceiver()) as receiver:
        delivery = _delivery(hook_to(receiver.url))
        real = webhook_transport.post

        def slow_post(url, body, headers):
            # Meanwhile the sweep gives this attempt up and another attempt delivers it.
            WebhookDelivery.objects.filter(pk=delivery.pk).update(
                status="delivered", attempts=1, last_attempt_at=timezone.now() + timedelta(seconds=1)
            )
            return real(url, body, headers)

        monkeypatch.setattr(webhooks, "post", slow_post)
        assert webhooks.deliver(delivery_id=delivery.pk) == "delivered"
        delivery.refresh_from_db()
        assert delivery.attempts == 1  # the late attempt's outcome was not written over it


def test_the_event_and_delivery_headers_are_signed(hook_to):
    with serving(WebhookReceiver()) as receiver:
        hook = hook_to(receiver.url)
        delivery = _delivery(hook)
        webhooks.deliver(delivery_id=delivery.pk)
        [request] = receiver.requests
    verified(request, hook.secret)
    for header, forged in (("Ragsite-Event", "build.failed"), ("Ragsite-Delivery", "0" * 36)):
        tampered = {**request, "headers": {**request["headers"], header: forged}}
        with pytest.raises(AssertionError):
            verified(tampered, hook.secret)


@pytest.mark.parametrize(
    "address",
    [
        "fec0::1",
        "192.0.0.8",
        "192.88.99.1",
        "192.0.0.9",
        "192.31.196.1",
        "192.52.193.1",
        "192.175.48.1",
        "198.18.0.1",
        "240.0.0.1",
        "255.255.255.255",
        "100:0:0:1::1",
        "64:ff9b:1::1",
        "2001:db8::1",
        "2001:2::1",
        "2620:4f:8000::1",
        "3fff::1",
        "5f00::1",
        "2002:808:808::1",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        "::ffff:8.8.8.8",
        "::8.8.8.8",
        "4000::1",
    ],
)
def test_every_special_purpose_address_is_refused(address, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    assert not public(address)
    host = f"[{address}]" if ":" in address else address
    with pytest.raises(webhooks.InvalidWebhook, match="special-purpose"):
        webhooks.validate_url(f"http://{host}/")


@pytest.mark.parametrize("address", ["8.8.8.8", "93.184.216.34", "2606:2800:220:1:248:1893:25c8:1946"])
def test_ordinary_unicast_addresses_are_public(address):
    assert public(address)


def test_a_secret_sealed_with_an_old_key_opens_after_rotation_and_reseals(agent, settings):
    from cryptography.fernet import Fernet
    from django.db import connection

    from collections_app.sealed import keys

    settings.WEBHOOK_ALLOW_PRIVATE = True
    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.WEBHOOK_SECRET_KEYS = old
    hook = Webhook.objects.create(agent=agent, url="http://127.0.0.1:9/", events=["build.succeeded"])

    def stored() -> str:
        with connection.cursor() as cursor:
            cursor.execute("SELECT secret FROM collections_app_webhook WHERE id = %s", [hook.pk])
            return cursor.fetchone()[0]

    before = stored()
    settings.WEBHOOK_SECRET_KEYS = f"{new},{old}"
    assert keys()[0] == new.encode()
    assert Webhook.objects.get(pk=hook.pk).secret == hook.secret  # opened with the old key
    assert webhooks.reseal_secrets() == (1, 0)
    assert stored() != before
    settings.WEBHOOK_SECRET_KEYS = new  # the old key dropped
    assert Webhook.objects.get(pk=hook.pk).secret == hook.secret
    settings.WEBHOOK_SECRET_KEYS = Fernet.generate_key().decode()  # a key that never sealed it
    assert Webhook.objects.get(pk=hook.pk).secret == ""
    assert webhooks.reseal_secrets() == (0, 1)


@pytest.mark.django_db(transaction=True)
def test_the_migration_seals_the_secrets_written_before_it(agent):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.migrate([("collections_app", "0020_index_files")])
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO collections_app_webhook (agent_id, url, events, secret, active, description, "
            "created_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            [agent.pk, "http://127.0.0.1:9/", '["build.succeeded"]', "whsec_plain", True, "", timezone.now()],
        )
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes("collections_app"))
    with connection.cursor() as cursor:
        cursor.execute("SELECT secret FROM collections_app_webhook")
        [stored] = cursor.fetchone()
    assert stored.startswith("fernet:") and "whsec_plain" not in stored
    assert Webhook.objects.get().secret == "whsec_plain"
