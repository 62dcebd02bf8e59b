"""Webhooks: staff register URLs per agent; builds and known answers tell them what happened
(docs/webhooks.md).

An event is written as one `WebhookDelivery` per subscribed hook in the transaction that records it,
and sent by a task once that commits, on a queue of its own (WEBHOOK_QUEUE) so a slow receiver never
holds a build's worker. Each attempt is signed: HMAC-SHA256, keyed by the hook's own secret, over
``<timestamp>.<event>.<delivery id>.<body>``, in the ``Ragsite-Signature`` header, so the
``Ragsite-Timestamp``, ``Ragsite-Event`` and ``Ragsite-Delivery`` headers are signed with the body. A
failed attempt (a connection error, the attempt's deadline passing, any answer but 2xx) is tried again
by the webhook sweep after a backoff, up to `MAX_ATTEMPTS`; every attempt is recorded on the delivery,
and only by the attempt that claimed it.

A payload carries ids, counts and names a board may show (agent, collection, model): never a path, a
question, a paragraph, a document name or an error message, which could hold any of them.

Where a delivery may go, and the bounded POST itself, are services.webhooks.transport's.
"""

import hashlib
import hmac
import http.client
import json
import logging
import time
from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ragsite import queue, tracing
from ragsite.errors import RagsiteError
from ragsite.instruments import WEBHOOK_DELIVERIES

from ...conf import settings
from ...models import BuildRun, KnownAnswersReport, Webhook, WebhookDelivery
from ...models.sync import new_secret
from .transport import InvalidWebhook, post, validate_url

__all__ = ["InvalidWebhook", "validate_url"]  # with the events below: what the admin and tasks use

logger = logging.getLogger("ragsite.webhooks")

# Seconds before attempt 2, 3, …: the sweep runs every minute, so the first retry comes within about one.
BACKOFF = (30, 120, 600, 3600, 6 * 3600)
MAX_ATTEMPTS = len(BACKOFF) + 1
SIGNATURE_HEADER, TIMESTAMP_HEADER = "Ragsite-Signature", "Ragsite-Timestamp"
EVENT_HEADER, DELIVERY_HEADER = "Ragsite-Event", "Ragsite-Delivery"
STATUS_EVENTS = {
    BuildRun.SUCCEEDED: Webhook.BUILD_SUCCEEDED,
    BuildRun.SUCCEEDED_WITH_REVIEW: Webhook.BUILD_SUCCEEDED_WITH_REVIEW,
    BuildRun.FAILED: Webhook.BUILD_FAILED,
    BuildRun.REFUSED: Webhook.BUILD_REFUSED,
}


# --- Targets ------------------------------------------------------------------


def validate_events(events) -> list[str]:
    if not isinstance(events, list | tuple) or not events:
        raise RagsiteError(f"choose at least one event of {', '.join(Webhook.EVENTS)}", code="invalid_events")
    unknown = sorted(set(events) - set(Webhook.EVENTS))
    if unknown:
        raise RagsiteError(
            f"unknown events {', '.join(unknown)}; known: {', '.join(Webhook.EVENTS)}", code="invalid_events"
        )
    return [event for event in Webhook.EVENTS if event in events]


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


def sync_failed(*, collection, reason: str, checked_at) -> int:
    """`sync.failed`: a synced collection's check could not be carried out. `reason` is a code or an
    exception's class name, never its message (which could hold a path)."""
    data = {
        "agent": collection.agent.agent_id,
        "collection": collection.name,
        "sync": {"reason": reason, "checked_at": _iso(checked_at)},
    }
    return emit(agent_id=collection.agent_id, event=Webhook.SYNC_FAILED, data=data)


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
        transaction.on_commit(tracing.keeping_context(lambda pk=delivery.pk: _enqueue(pk)))
    return len(hooks)


def _wants(events: list, event: str) -> bool:
    """A hook that asked for build.succeeded is told of a build that went live with documents in review
    too, under that build's own event, so no live build goes unannounced to a hook made before it."""
    if event == Webhook.BUILD_SUCCEEDED_WITH_REVIEW:
        return event in events or Webhook.BUILD_SUCCEEDED in events
    return event in events


def _enqueue(delivery_id: int) -> None:
    # In the build's trace, when a traced build finished; WEBHOOK_QUEUE "" is the main cluster.
    queue.enqueue(
        "collections_app.tasks.deliver_webhook",
        delivery_id,
        name=f"webhook-{delivery_id}",
        cluster=settings.WEBHOOK_QUEUE or None,
    )


def attempt_bound() -> float:
    """Seconds after which an attempt still "sending" cannot be live: the cluster running deliveries kills
    a task past its timeout (config/settings.py gives the webhook cluster the attempt's deadline plus a
    minute), and a minute more covers the clocks."""
    q_cluster = settings.Q_CLUSTER
    queue = settings.WEBHOOK_QUEUE
    own = (q_cluster.get("ALT_CLUSTERS") or {}).get(queue, {}) if queue else {}
    return float(own.get("timeout") or q_cluster.get("timeout") or 3600) + 60


# --- Sending ------------------------------------------------------------------


def body_of(delivery: WebhookDelivery) -> bytes:
    """The exact bytes sent, the same at every attempt."""
    return json.dumps(delivery.payload, separators=(",", ":"), sort_keys=True).encode()


def signature(*, secret: str, timestamp: int, event: str, delivery: str, body: bytes) -> str:
    """HMAC-SHA256 of ``<timestamp>.<event>.<delivery id>.<body>`` keyed by the hook's secret, as
    ``sha256=<hex>``: every header a receiver acts on is signed with the body."""
    signed = f"{timestamp}.{event}.{delivery}.".encode() + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


# An attempt's outcome in the metrics, by the delivery's status after it.
ATTEMPT_OUTCOMES = {
    WebhookDelivery.DELIVERED: "delivered",
    WebhookDelivery.PENDING: "retrying",
    WebhookDelivery.FAILED: "failed",
}


def deliver(*, delivery_id: int) -> str:
    """One attempt at a delivery that is due; returns its status after. Never raises for the
    receiver's faults.

    The attempt is claimed by a conditional update (pending → sending, stamped with the claim's
    moment), so a delivery queued twice is sent once, and only the attempt holding the claim records
    its outcome: one the sweep gave up on as dead cannot overwrite the attempt that replaced it."""
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
    status_code, error = None, ""
    if not hook.active:
        error = "the webhook was switched off"
    elif not hook.secret:
        error = "the signing secret cannot be read (WEBHOOK_SECRET_KEYS no longer holds its key)"
    else:
        try:
            status_code = post(hook.url, body_of(delivery), _headers(delivery, hook.secret))
            if not 200 <= status_code < 300:
                error = f"the receiver answered HTTP {status_code}"
        except InvalidWebhook as exc:
            error = exc.message
        except (OSError, http.client.HTTPException) as exc:
            error = f"{type(exc).__name__}: {exc}"
    attempts = delivery.attempts + 1
    fields = {"attempts": attempts, "response_status": status_code, "last_error": error[:300]}
    if not error:
        fields.update(status=WebhookDelivery.DELIVERED, delivered_at=now, next_attempt_at=None)
    elif attempts >= MAX_ATTEMPTS or not hook.active:
        fields.update(status=WebhookDelivery.FAILED, next_attempt_at=None)
    else:
        fields.update(
            status=WebhookDelivery.PENDING,
            next_attempt_at=now + timedelta(seconds=BACKOFF[attempts - 1]),
        )
    recorded = WebhookDelivery.objects.filter(
        pk=delivery.pk, status=WebhookDelivery.SENDING, last_attempt_at=now
    ).update(**fields)
    WEBHOOK_DELIVERIES.labels(outcome=ATTEMPT_OUTCOMES[fields["status"]]).inc()
    logger.info(
        "webhook delivery %s (%s) to hook %s: attempt %s, %s%s",
        delivery.pk,
        delivery.event,
        hook.pk,
        attempts,
        fields["status"] if not error else f"{fields['status']} ({error[:100]})",
        "" if recorded else "; not recorded: the sweep had given this attempt up",
    )
    return fields["status"] if recorded else WebhookDelivery.objects.get(pk=delivery.pk).status


def _headers(delivery: WebhookDelivery, secret: str) -> dict:
    timestamp = int(time.time())
    uid = str(delivery.uid)
    return {
        "Content-Type": "application/json",
        "User-Agent": "ragsite-webhooks",
        EVENT_HEADER: delivery.event,
        DELIVERY_HEADER: uid,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature(
            secret=secret, timestamp=timestamp, event=delivery.event, delivery=uid, body=body_of(delivery)
        ),
    }


def retry_due(now=None) -> list[int]:
    """The webhook sweep: queue every delivery whose backoff has passed; returns their ids.

    A delivery left "sending" by a worker that died is put back to pending first, once its attempt
    could no longer be running (`attempt_bound`: past the kill timeout of the cluster sending it), so it
    is tried again rather than lost, and a slow live attempt is never sent a second time."""
    now = now or timezone.now()
    stuck = now - timedelta(seconds=attempt_bound())
    WebhookDelivery.objects.filter(status=WebhookDelivery.SENDING, last_attempt_at__lt=stuck).update(
        status=WebhookDelivery.PENDING, next_attempt_at=now, last_error="the attempt's worker stopped"
    )
    due = list(
        WebhookDelivery.objects.filter(status=WebhookDelivery.PENDING, next_attempt_at__lte=now)
        .order_by("next_attempt_at")
        .values_list("pk", flat=True)[:500]
    )
    for pk in due:
        transaction.on_commit(tracing.keeping_context(lambda pk=pk: _enqueue(pk)))
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
        transaction.on_commit(tracing.keeping_context(lambda pk=pk: _enqueue(pk)))
    return len(ids)


def new_secrets(*, hooks) -> dict[int, str]:
    """Give each hook a fresh signing secret (a leaked one, say); deliveries from now on are signed with
    it. Returns {hook id: new secret}: the one time they are shown."""
    changed = {}
    for hook in hooks:
        hook.secret = new_secret()
        hook.save(update_fields=["secret"])
        changed[hook.pk] = hook.secret
    return changed


def reseal_secrets() -> tuple[int, int]:
    """Seal every hook's secret again with the first of WEBHOOK_SECRET_KEYS (after a key was added in front);
    returns (resealed, unreadable: no configured key opens them)."""
    resealed = unreadable = 0
    for hook in Webhook.objects.all():
        if not hook.secret:
            unreadable += 1
            continue
        hook.save(update_fields=["secret"])
        resealed += 1
    return resealed, unreadable
