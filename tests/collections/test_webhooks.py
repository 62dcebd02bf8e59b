"""Webhooks (issue 26): signed deliveries of build and known-answer events, retried, recorded,
SSRF-checked."""

import hashlib
import hmac
import json
import socket
from datetime import timedelta

import pytest
from django.utils import timezone

from collections_app.models import BuildRun, Webhook, WebhookDelivery
from collections_app.services import known_answers, webhooks
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from tests.conftest import HANDBOOK
from tests.servers import WebhookReceiver, serving

pytestmark = pytest.mark.django_db

QUESTION = "what is mileage reimbursed at per kilometre"


@pytest.fixture
def receiver(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = True  # the receiver listens on 127.0.0.1
    with serving(WebhookReceiver()) as server:
        yield server


@pytest.fixture
def handbook(agent, knowledge_folder):
    folder = knowledge_folder("handbook", HANDBOOK)
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    collection.folder_path = folder
    return collection


@pytest.fixture
def build(django_capture_on_commit_callbacks):
    """A build as the worker runs it: deliveries and measurements run when it commits (Conf.SYNC)."""

    def run(collection) -> BuildRun:
        with django_capture_on_commit_callbacks(execute=True):
            done = build_collection(collection=collection)
        done.refresh_from_db()
        return done

    return run


def hook(agent, url, events=Webhook.EVENTS) -> Webhook:
    return Webhook.objects.create(agent=agent, url=webhooks.validate_url(url), events=list(events))


def verified(request: dict, secret: str) -> dict:
    """What a receiver does (docs/webhooks.md): check the signature over the timestamp, event and delivery
    headers and the body, then parse."""
    headers = request["headers"]
    signed = (
        f"{headers['Ragsite-Timestamp']}.{headers['Ragsite-Event']}.{headers['Ragsite-Delivery']}.".encode()
        + request["body"]
    )
    expected = hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["Ragsite-Signature"], f"sha256={expected}")
    return json.loads(request["body"])


def test_a_successful_build_is_delivered_once_signed_with_ids_and_counts_only(
    agent, handbook, receiver, build
):
    registered = hook(agent, receiver.url + "/hooks/ragsite?board=1")
    run = build(handbook)
    assert run.status == BuildRun.SUCCEEDED
    assert len(receiver.requests) == 1
    request = receiver.requests[0]
    assert request["path"] == "/hooks/ragsite?board=1"
    payload = verified(request, registered.secret)
    assert payload["event"] == "build.succeeded" == request["headers"]["Ragsite-Event"]
    assert payload["id"] == request["headers"]["Ragsite-Delivery"]
    data = payload["data"]
    assert (data["agent"], data["collection"], data["build"]["id"]) == ("alpha", "handbook", run.pk)
    assert data["build"]["passages"] == run.passages and data["build"]["documents"]["read"] == 3
    # Never a path, a document's text or a document name.
    raw = request["body"].decode()
    assert str(handbook.folder_path) not in raw and "deployment-secret" not in raw
    assert "Mileage" not in raw and "leave.md" not in raw
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("delivered", 1, 200)


def test_a_failed_attempt_is_retried_after_its_backoff_and_recorded(
    agent, handbook, receiver, build, django_capture_on_commit_callbacks
):
    registered = hook(agent, receiver.url, events=[Webhook.BUILD_SUCCEEDED])
    receiver.statuses = [500]
    build(handbook)
    delivery = WebhookDelivery.objects.get()
    assert (delivery.status, delivery.attempts, delivery.response_status) == ("pending", 1, 500)
    assert "HTTP 500" in delivery.last_error
    assert delivery.next_attempt_at - delivery.last_attempt_at == timedelta(seconds=webhooks.BACKOFF[0])
    # Not yet due: the sweep queues nothing.
    assert webhooks.retry_due() == []
    # Its backoff over (moved to now rather than waited for), the sweep queues it and it is sent.
    WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        assert webhooks.retry_due() == [delivery.pk]
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_status, delivery.last_error) == (
        "delivered",
        2,
        200,
        "",
    )
    first, second = receiver.requests
    assert first["body"] == second["body"]  # the same event, the same delivery id
    assert first["headers"]["Ragsite-Delivery"] == second["headers"]["Ragsite-Delivery"]
    verified(second, registered.secret)
    # Delivered: queued again by mistake, it is not sent again.
    assert webhooks.deliver(delivery_id=delivery.pk) == "delivered" and len(receiver.requests) == 2


def test_a_delivery_gives_up_after_its_last_attempt(agent, handbook, receiver, build):
    hook(agent, receiver.url, events=[Webhook.BUILD_SUCCEEDED])
    receiver.statuses = [503] * webhooks.MAX_ATTEMPTS
    build(handbook)
    delivery = WebhookDelivery.objects.get()
    for _ in range(webhooks.MAX_ATTEMPTS - 1):
        WebhookDelivery.objects.filter(pk=delivery.pk).update(next_attempt_at=timezone.now())
        webhooks.deliver(delivery_id=delivery.pk)
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.next_attempt_at) == (
        "failed",
        webhooks.MAX_ATTEMPTS,
        None,
    )
    assert len(receiver.requests) == webhooks.MAX_ATTEMPTS


def test_a_refused_build_tells_its_refusal_and_the_known_answers_it_would_lose(
    agent, handbook, receiver, build, settings
):
    registered = hook(agent, receiver.url)
    known_answers.set_known_answers(
        collection=handbook, items=[{"question": QUESTION, "answer": "0.42 per kilometre"}]
    )
    build(handbook)
    receiver.requests.clear()
    settings.KNOWN_ANSWERS_GATE = 0
    (handbook.folder_path / "travel.md").write_text("# Travel\n\nTrains are booked in standard class.\n")
    run = build(handbook)
    assert run.status == BuildRun.REFUSED
    events = {
        verified(r, registered.secret)["event"]: verified(r, registered.secret) for r in receiver.requests
    }
    assert sorted(events) == ["build.refused", "known_answers.lost"] and len(receiver.requests) == 2
    lost = events["known_answers.lost"]["data"]
    assert lost["build"] == {"id": run.pk, "status": "refused", "trigger": "request"}
    assert (lost["known_answers"]["lost"], lost["known_answers"]["answers"]) == (1, 1)
    raw = b" ".join(r["body"] for r in receiver.requests).decode()
    assert "mileage" not in raw.lower() and "0.42" not in raw and "KNOWN_ANSWERS_GATE" not in raw


def test_a_live_build_that_loses_answers_tells_it_after_its_measurement(agent, handbook, receiver, build):
    hook(agent, receiver.url, events=[Webhook.KNOWN_ANSWERS_LOST])
    known_answers.set_known_answers(
        collection=handbook, items=[{"question": QUESTION, "answer": "0.42 per kilometre"}]
    )
    build(handbook)
    assert receiver.requests == []  # nothing lost: the first measured build
    (handbook.folder_path / "travel.md").write_text("# Travel\n\nTrains are booked in standard class.\n")
    run = build(handbook)
    assert run.status == BuildRun.SUCCEEDED
    [request] = receiver.requests
    data = json.loads(request["body"])["data"]
    assert data["build"] == {"id": run.pk, "status": "succeeded", "trigger": "request"}
    assert data["known_answers"]["lost"] == 1


def test_a_failed_build_is_told_and_other_agents_hooks_hear_nothing(agent, handbook, receiver, build):
    hook(agent, receiver.url, events=[Webhook.BUILD_FAILED])
    other, _key = create_agent(agent_id="beta")
    hook(other, receiver.url)
    for path in handbook.folder_path.iterdir():
        path.unlink()
    run = build(handbook)
    assert run.status == BuildRun.FAILED
    [request] = receiver.requests
    payload = json.loads(request["body"])
    assert payload["event"] == "build.failed" and payload["data"]["agent"] == "alpha"
    assert "error" not in payload["data"]["build"]  # a message could name anything


@pytest.mark.parametrize(
    "url",
    [
        "ftp://hooks.example.com/",
        "file:///etc/passwd",
        "hooks.example.com/x",
        "http:///nohost",
        "http://user:secret@93.184.216.34/",
        "http://127.0.0.1:9/",
        "http://localhost/",
        "http://10.1.2.3/",
        "http://192.168.0.10/",
        "http://172.16.5.4/",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::1]/",
        "http://[::ffff:127.0.0.1]/",
        "http://0.0.0.0/",
        "http://100.64.0.1/",
        "http://[fe80::1]/",
        "http://[fd00::1]/",
        "http://224.0.0.1/",
        "http://" + "a" * 500 + ".com/",
        "http://93.184.216.34:99999/",
    ],
)
def test_urls_that_are_not_public_http_targets_are_refused(url, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    with pytest.raises(webhooks.InvalidWebhook):
        webhooks.validate_url(url)


def test_public_targets_are_accepted_and_private_ones_only_with_the_setting(settings):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    assert webhooks.validate_url("https://93.184.216.34/hook") == "https://93.184.216.34/hook"
    assert webhooks.validate_url("http://[2606:2800:220:1:248:1893:25c8:1946]/")
    settings.WEBHOOK_ALLOW_PRIVATE = True
    assert webhooks.validate_url("http://127.0.0.1:8080/hook")


@pytest.fixture
def dns(monkeypatch):
    """Answers for made-up host names; every other name resolves as usual."""
    answers: dict[str, list[str]] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if host in answers:
            return [
                (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
                for a in answers[host]
            ]
        return real(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers


def test_a_name_with_any_private_address_is_refused(dns, settings):
    settings.WEBHOOK_ALLOW_PRIVATE = False
    dns["mixed.example.test"] = ["93.184.216.34", "127.0.0.1"]
    with pytest.raises(webhooks.InvalidWebhook, match="private, loopback, link-local"):
        webhooks.validate_url("http://mixed.example.test/")


def test_a_name_that_turns_private_after_it_was_saved_is_not_sent_to(
    agent, handbook, receiver, build, dns, settings
):
    port = receiver.url.rsplit(":", 1)[1]
    settings.WEBHOOK_ALLOW_PRIVATE = False
    dns["rebind.example.test"] = ["93.184.216.34"]
    hook(agent, f"http://rebind.example.test:{port}/", events=[Webhook.BUILD_SUCCEEDED])
    dns["rebind.example.test"] = ["127.0.0.1"]  # the attacker's DNS answers differently at delivery
    build(handbook)
    delivery = WebhookDelivery.objects.get()
    assert receiver.requests == []
    assert delivery.status == "pending" and "private, loopback, link-local" in delivery.last_error


def test_the_delivery_goes_to_the_address_that_was_checked(agent, handbook, receiver, build, dns):
    # A name resolving to the receiver's address reaches it, with the name as its Host.
    port = receiver.url.rsplit(":", 1)[1]
    dns["board.example.test"] = ["127.0.0.1"]
    hook(agent, f"http://board.example.test:{port}/in", events=[Webhook.BUILD_SUCCEEDED])
    build(handbook)
    [request] = receiver.requests
    assert request["headers"]["Host"] == f"board.example.test:{port}"


def test_events_are_validated():
    assert webhooks.validate_events(["known_answers.lost", "build.failed"]) == [
        "build.failed",
        "known_answers.lost",
    ]
    for bad in ([], ["build.started"], "build.failed"):
        with pytest.raises(Exception) as refused:
            webhooks.validate_events(bad)
        assert refused.value.code == "invalid_events"


def test_a_build_whose_worker_died_is_told_as_failed_once(
    agent, handbook, receiver, django_capture_on_commit_callbacks
):
    from collections_app.services.builds import fail_stale_builds, request_build

    hook(agent, receiver.url, events=[Webhook.BUILD_FAILED])
    run = request_build(collection=handbook, requested_by="test", enqueue=False)
    BuildRun.objects.filter(pk=run.pk).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    with django_capture_on_commit_callbacks(execute=True):
        assert fail_stale_builds() == 1
        assert fail_stale_builds() == 0
    [request] = receiver.requests
    assert json.loads(request["body"])["data"]["build"]["id"] == run.pk
