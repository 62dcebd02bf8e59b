"""Webhooks: staff register URLs per agent; builds and known answers tell them what happened
(docs/webhooks.md).

An event is written as one `WebhookDelivery` per subscribed hook in the transaction that records it,
and sent by a task once that commits. Each attempt is signed: HMAC-SHA256, keyed by the hook's own
secret, over ``<timestamp>.<body>``, in the ``Ragsite-Signature`` header beside ``Ragsite-Timestamp``.
A failed attempt (a connection error, a timeout, any answer but 2xx) is tried again by the webhook
sweep after a backoff, up to `MAX_ATTEMPTS`; every attempt is recorded on the delivery.

A payload carries ids, counts and names a board may show (agent, collection, model): never a path, a
question, a paragraph, a document name or an error message, which could hold any of them.

Targets are checked against SSRF when a hook is saved and again at every attempt: http or https only,
and every address the host resolves to must be public unless WEBHOOK_ALLOW_PRIVATE is on. The
connection then goes to the address that was checked, so a name that resolves differently a moment
later (DNS rebinding) cannot send the request elsewhere; redirects are not followed.
"""

import hashlib
import hmac
import http.client
import ipaddress
import json
import logging
import socket
import ssl
import time
from datetime import timedelta
from urllib.parse import urlsplit

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ragsite.errors import RagsiteError

from ..conf import settings
from ..models import BuildRun, KnownAnswersReport, Webhook, WebhookDelivery
from ..models.sync import new_secret

logger = logging.getLogger("ragsite.webhooks")

# Seconds before attempt 2, 3, …: the sweep runs every minute, so the first retry comes within about one.
BACKOFF = (30, 120, 600, 3600, 6 * 3600)
MAX_ATTEMPTS = len(BACKOFF) + 1
MAX_URL_CHARS = Webhook._meta.get_field("url").max_length
SIGNATURE_HEADER, TIMESTAMP_HEADER = "Ragsite-Signature", "Ragsite-Timestamp"
EVENT_HEADER, DELIVERY_HEADER = "Ragsite-Event", "Ragsite-Delivery"
STATUS_EVENTS = {
    BuildRun.SUCCEEDED: Webhook.BUILD_SUCCEEDED,
    BuildRun.SUCCEEDED_WITH_REVIEW: Webhook.BUILD_SUCCEEDED_WITH_REVIEW,
    BuildRun.FAILED: Webhook.BUILD_FAILED,
    BuildRun.REFUSED: Webhook.BUILD_REFUSED,
}


class InvalidWebhook(RagsiteError):
    code = "invalid_webhook_url"
    status = 400


# --- Targets ------------------------------------------------------------------


def validate_url(url: str) -> str:
    """The URL if a delivery may go there; `InvalidWebhook` saying why not (resolving its host)."""
    host, port, _https = _parts(url)
    _addresses(host, port)
    return url


def validate_events(events) -> list[str]:
    if not isinstance(events, list | tuple) or not events:
        raise RagsiteError(f"choose at least one event of {', '.join(Webhook.EVENTS)}", code="invalid_events")
    unknown = sorted(set(events) - set(Webhook.EVENTS))
    if unknown:
        raise RagsiteError(
            f"unknown events {', '.join(unknown)}; known: {', '.join(Webhook.EVENTS)}", code="invalid_events"
        )
    return [event for event in Webhook.EVENTS if event in events]


def _parts(url: str) -> tuple[str, int, bool]:
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise InvalidWebhook(f"a webhook URL is 1 to {MAX_URL_CHARS} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise InvalidWebhook("the webhook URL cannot be parsed") from None
    if parts.scheme not in ("http", "https"):
        raise InvalidWebhook("a webhook URL is http:// or https://")
    if not parts.hostname or parts.username is not None or parts.password is not None:
        raise InvalidWebhook("a webhook URL names a host, without a user name or password")
    https = parts.scheme == "https"
    return parts.hostname, port or (443 if https else 80), https


def _addresses(host: str, port: int) -> list[str]:
    """Every address `host` resolves to, all checked; refuses the host when any is not public."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        raise InvalidWebhook(f'the webhook host "{host}" does not resolve') from None
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    if not settings.WEBHOOK_ALLOW_PRIVATE:
        for address in addresses:
            if not _public(address):
                raise InvalidWebhook(
                    f'the webhook host "{host}" resolves to a private, loopback or link-local address; '
                    "refused (WEBHOOK_ALLOW_PRIVATE allows it)"
                )
    if not addresses:
        raise InvalidWebhook(f'the webhook host "{host}" does not resolve')
    return addresses


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    for form in (ip, getattr(ip, "ipv4_mapped", None), getattr(ip, "sixtofour", None)):
        if form is not None and (not form.is_global or form.is_multicast or form.is_reserved):
            return False
    return True


# --- Events -------------------------------------------------------------------


def build_finished(*, run: BuildRun) -> int:
    """Tell the agent's hooks how a build ended (and, for a refused one, the known answers it would lose)."""
    event = STATUS_EVENTS.get(run.status)
    if event is None:
        return 0
    sent = emit(agent_id=run.collection.agent_id, event=event, data=_build_data(run))
    if run.status == BuildRun.REFUSED:
        report = KnownAnswersReport.objects.filter(build=run).first()
        if report is not None:
            sent += known_answers_measured(report=report, run=run)
    return sent


def documents_need_review(*, run: BuildRun, documents: int) -> int:
    """`document.needs_review` as the build that put `documents` documents in review commits: counts only
    (the collection page names them; a name could tell a receiver of a document a reader may not see)."""
    data = _build_data(run, full=False)
    data["review"] = {"documents": documents, "waiting": run.documents_in_review}
    return emit(agent_id=run.collection.agent_id, event=Webhook.DOCUMENT_NEEDS_REVIEW, data=data)


def known_answers_measured(*, report: KnownAnswersReport, run: BuildRun | None = None) -> int:
    """`known_answers.lost` when a measured build no longer finds answers the live build before it found."""
    if not report.lost:
        return 0
    run = run or report.build
    data = _build_data(run, full=False)
    data["known_answers"] = {
        "answers": report.answers,
        "controls": report.controls,
        "lost": len(report.lost),
        "found_at_1": report.found_at_1,
        "found_at_5": report.found_at_5,
    }
    return emit(agent_id=run.collection.agent_id, event=Webhook.KNOWN_ANSWERS_LOST, data=data)


def _build_data(run: BuildRun, *, full: bool = True) -> dict:
    collection = run.collection
    build = {
        "id": run.pk,
        "status": run.status,
        "trigger": "sync" if run.requested_by == "sync" else "request",
    }
    if full:
        build.update(
            {
                "passages": run.passages,
                "model": run.model,
                "paragraphs_embedded": run.paragraphs_embedded,
                "documents": {
                    "total": run.documents_total,
                    "read": run.documents_read,
                    "reused": run.documents_reused,
                    "refused": run.documents_refused,
                    "in_review": run.documents_in_review,
                },
                "created_at": _iso(run.created_at),
                "finished_at": _iso(run.finished_at),
            }
        )
    return {"agent": collection.agent.agent_id, "collection": collection.name, "build": build}


def _iso(moment) -> str | None:
    return moment.isoformat() if moment else None


def emit(*, agent_id: int, event: str, data: dict) -> int:
    """One delivery per active hook of the agent that wants `event`, sent once this transaction commits."""
    hooks = [
        hook for hook in Webhook.objects.filter(agent_id=agent_id, active=True) if _wants(hook.events, event)
    ]
    now = timezone.now()
    for hook in hooks:
        delivery = WebhookDelivery(webhook=hook, event=event, created_at=now, next_attempt_at=now)
        delivery.payload = {
            "id": str(delivery.uid),
            "event": event,
            "created_at": now.isoformat(),
            "data": data,
        }
        delivery.save()
        transaction.on_commit(lambda pk=delivery.pk: _enqueue(pk))
    return len(hooks)


def _wants(events: list, event: str) -> bool:
    """A hook that asked for build.succeeded is told of a build that went live with documents in review
    too, under that build's own event, so no live build goes unannounced to a hook made before it."""
    if event == Webhook.BUILD_SUCCEEDED_WITH_REVIEW:
        return event in events or Webhook.BUILD_SUCCEEDED in events
    return event in events


def _enqueue(delivery_id: int) -> None:
    from django_q.tasks import async_task

    async_task("collections_app.tasks.deliver_webhook", delivery_id, task_name=f"webhook-{delivery_id}")


# --- Sending ------------------------------------------------------------------


def body_of(delivery: WebhookDelivery) -> bytes:
    """The exact bytes sent, the same at every attempt."""
    return json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True).encode()


def signature(*, secret: str, timestamp: int, body: bytes) -> str:
    """HMAC-SHA256 of ``<timestamp>.<body>`` keyed by the hook's secret, as ``sha256=<hex>``."""
    mac = hmac.new(secret.encode(), str(timestamp).encode() + b"." + body, hashlib.sha256)
    return "sha256=" + mac.hexdigest()


def deliver(*, delivery_id: int) -> str:
    """One attempt at a delivery that is due; returns its status after. Never raises for the
    receiver's faults.

    The attempt is claimed by a conditional update (pending → sending), so a delivery queued twice is
    sent once; only a receiver that took the body but answered too late can see it twice, and the
    ``Ragsite-Delivery`` header lets it tell."""
    now = timezone.now()
    claimed = WebhookDelivery.objects.filter(
        Q(next_attempt_at__isnull=True) | Q(next_attempt_at__lte=now),
        pk=delivery_id,
        status=WebhookDelivery.PENDING,
    ).update(status=WebhookDelivery.SENDING, last_attempt_at=now)
    delivery = WebhookDelivery.objects.select_related("webhook").filter(pk=delivery_id).first()
    if delivery is None or not claimed:
        return delivery.status if delivery else "gone"
    hook = delivery.webhook
    body = body_of(delivery)
    timestamp = int(time.time())
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "ragsite-webhooks",
        EVENT_HEADER: delivery.event,
        DELIVERY_HEADER: str(delivery.uid),
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(secret=hook.secret, timestamp=timestamp, body=body),
    }
    status_code, error = None, ""
    if not hook.active:
        error = "the webhook was switched off"
    else:
        try:
            status_code = _post(hook.url, body, headers)
            if not 200 <= status_code < 300:
                error = f"the receiver answered HTTP {status_code}"
        except InvalidWebhook as exc:
            error = exc.message
        except (OSError, http.client.HTTPException) as exc:
            error = f"{type(exc).__name__}: {exc}"
    delivery.attempts += 1
    delivery.response_status, delivery.last_error = status_code, error[:300]
    if not error:
        delivery.status, delivery.delivered_at, delivery.next_attempt_at = (
            WebhookDelivery.DELIVERED,
            now,
            None,
        )
    elif delivery.attempts >= MAX_ATTEMPTS or not hook.active:
        delivery.status, delivery.next_attempt_at = WebhookDelivery.FAILED, None
    else:
        delivery.status = WebhookDelivery.PENDING
        delivery.next_attempt_at = now + timedelta(seconds=BACKOFF[delivery.attempts - 1])
    delivery.save(
        update_fields=[
            "attempts",
            "response_status",
            "last_error",
            "status",
            "delivered_at",
            "next_attempt_at",
        ]
    )
    logger.info(
        "webhook delivery %s (%s) to hook %s: attempt %s, %s",
        delivery.pk,
        delivery.event,
        hook.pk,
        delivery.attempts,
        delivery.status if not error else f"{delivery.status} ({error[:100]})",
    )
    return delivery.status


def _post(url: str, body: bytes, headers: dict) -> int:
    """POST to the address that was checked, never to one the name resolves to later; the status code."""
    host, port, https = _parts(url)
    timeout = float(settings.WEBHOOK_TIMEOUT)
    error: OSError | None = None
    for address in _addresses(host, port):
        try:
            raw = socket.create_connection((address, port), timeout=timeout)
            break
        except OSError as exc:
            error = exc
    else:
        raise error or OSError("no address to connect to")
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if https:
        context = ssl.create_default_context()
        connection = http.client.HTTPSConnection(host, port, timeout=timeout, context=context)
        connection.sock = context.wrap_socket(raw, server_hostname=host)
    else:
        connection = http.client.HTTPConnection(host, port, timeout=timeout)
        connection.sock = raw
    try:
        connection.request("POST", target, body=body, headers=headers)
        response = connection.getresponse()
        response.read(64 * 1024)
        return response.status
    finally:
        connection.close()


def retry_due(now=None) -> list[int]:
    """The webhook sweep: queue every delivery whose backoff has passed; returns their ids.

    A delivery left "sending" by a worker that died is put back to pending first (once its attempt
    could no longer be running), so it is tried again rather than lost."""
    now = now or timezone.now()
    stuck = now - timedelta(seconds=float(settings.WEBHOOK_TIMEOUT) * 3 + 60)
    WebhookDelivery.objects.filter(status=WebhookDelivery.SENDING, last_attempt_at__lt=stuck).update(
        status=WebhookDelivery.PENDING, next_attempt_at=now, last_error="the attempt's worker stopped"
    )
    due = list(
        WebhookDelivery.objects.filter(status=WebhookDelivery.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:500]
    )
    for pk in due:
        transaction.on_commit(lambda pk=pk: _enqueue(pk))
    return due


def send_again(*, deliveries) -> int:
    """A person's retry: failed or waiting deliveries become due now and are queued. Their attempts are kept:
    one that had run out gets one more."""
    now = timezone.now()
    ids = list(
        deliveries.filter(status__in=(WebhookDelivery.PENDING, WebhookDelivery.FAILED)).values_list(
            "pk", flat=True
        )
    )
    WebhookDelivery.objects.filter(pk__in=ids).update(status=WebhookDelivery.PENDING, next_attempt_at=now)
    for pk in ids:
        transaction.on_commit(lambda pk=pk: _enqueue(pk))
    return len(ids)


def new_secrets(*, hooks) -> int:
    """Give each hook a fresh signing secret (a leaked one, say); deliveries from now on are signed with
    it."""
    changed = 0
    for hook in hooks:
        hook.secret = new_secret()
        hook.save(update_fields=["secret"])
        changed += 1
    return changed
