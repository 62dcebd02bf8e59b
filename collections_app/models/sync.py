"""Folders kept in sync, labels kept for returning documents, and webhooks with their deliveries."""

import secrets
import uuid

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.utils import timezone

from ..fields import SealedSecretField
from ..limits import MAX_SYNC_MINUTES

# Related models by name, so this module needs no import of its siblings.
COLLECTION, BUILD_RUN, AGENT = (
    "collections_app.Collection",
    "collections_app.BuildRun",
    "collections_app.Agent",
)


class CollectionSync(models.Model):
    """A collection that rebuilds itself when its folder changes, checked every `every` minutes.

    `snapshot` caches what the last check saw of each folder file (size, mtime in ns, inode and the
    SHA-256 read for that stat), so a check reads only files whose stat changed. `attempted` is the
    signature of the folder state the last sync build was asked for: the same state is not built
    again after a refusal or failure, only once something changes.
    """

    collection = models.OneToOneField(COLLECTION, on_delete=models.CASCADE, related_name="sync")
    enabled = models.BooleanField(default=False, help_text="Check the folder and build when it changed.")
    every = models.PositiveIntegerField(
        default=15,
        validators=[MinValueValidator(1), MaxValueValidator(MAX_SYNC_MINUTES)],
        help_text="Minutes between checks of the folder (1 to 10080).",
    )
    last_checked_at = models.DateTimeField(null=True, blank=True)
    last_changed_at = models.DateTimeField(
        null=True, blank=True, help_text="When a check last found a change."
    )
    next_check_at = models.DateTimeField(null=True, blank=True, db_index=True)
    # What the last check said, for people: "unchanged", "2 new, 1 changed, 1 deleted: build 41 queued", …
    last_outcome = models.CharField(max_length=300, blank=True)
    snapshot = models.JSONField(default=dict, blank=True)
    attempted = models.CharField(max_length=64, blank=True)
    last_build = models.ForeignKey(
        BUILD_RUN, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The sync builds of `attempted` asked again after a transient failure, and when the next may be.
    retries = models.PositiveSmallIntegerField(default=0, db_default=0)
    retry_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = "folder sync"

    def __str__(self):
        return f"sync of {self.collection} every {self.every} min"


class KeptLabels(models.Model):
    """The labels of a document that left its source, kept so that it regains them when it returns.

    Written by the build that removes the document (in its swap), read and deleted by the build that
    brings a document of the same name back: paragraph labels by the text fingerprint of the
    paragraph, as a rebuild carries them, and the document's default labels.
    """

    collection = models.ForeignKey(
        COLLECTION, on_delete=models.CASCADE, related_name="kept_labels", db_index=False
    )
    name = models.CharField(max_length=500)
    default_labels = models.JSONField(default=list, blank=True)  # label ids
    paragraph_labels = models.JSONField(default=dict, blank=True)  # {text fingerprint: [label ids]}
    kept_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name_plural = "kept labels"
        constraints = [models.UniqueConstraint(fields=["collection", "name"], name="kept_labels_unique_name")]

    def __str__(self):
        return f"labels kept for {self.name}"


def new_secret() -> str:
    return "whsec_" + secrets.token_urlsafe(32)


class Webhook(models.Model):
    """A URL told about one agent's builds; every delivery is signed with the hook's own secret."""

    BUILD_SUCCEEDED, BUILD_FAILED, BUILD_REFUSED = "build.succeeded", "build.failed", "build.refused"
    BUILD_SUCCEEDED_WITH_REVIEW = "build.succeeded_with_review"
    KNOWN_ANSWERS_LOST = "known_answers.lost"
    DOCUMENT_NEEDS_REVIEW = "document.needs_review"
    SYNC_FAILED = "sync.failed"
    EVENTS = (
        BUILD_SUCCEEDED,
        BUILD_SUCCEEDED_WITH_REVIEW,
        BUILD_FAILED,
        BUILD_REFUSED,
        KNOWN_ANSWERS_LOST,
        DOCUMENT_NEEDS_REVIEW,
        SYNC_FAILED,
    )

    agent = models.ForeignKey(AGENT, on_delete=models.CASCADE, related_name="webhooks")
    url = models.CharField(
        max_length=500,
        help_text="http or https; private addresses are refused unless WEBHOOK_ALLOW_PRIVATE is on.",
    )
    events = models.JSONField(default=list, blank=True)
    # Encrypted in the row (collections_app.sealed); shown to staff once, at creation and at rotation.
    secret = SealedSecretField(max_length=400, default=new_secret, editable=False)
    active = models.BooleanField(default=True)
    description = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["agent__agent_id", "pk"]

    def __str__(self):
        return f"webhook {self.pk} of {self.agent}"


class WebhookDelivery(models.Model):
    """One event sent (or being sent) to one webhook: the payload, its attempts and how they went."""

    PENDING, SENDING, DELIVERED, FAILED = "pending", "sending", "delivered", "failed"
    STATUS_CHOICES = [(s, s) for s in (PENDING, SENDING, DELIVERED, FAILED)]

    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    uid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    event = models.CharField(max_length=40)
    payload = models.JSONField()
    status = models.CharField(max_length=20, choices=STATUS_CHOICES, default=PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    response_status = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Of the last attempt."
    )
    last_error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        indexes = [models.Index(fields=["status", "next_attempt_at"], name="delivery_due")]

    def __str__(self):
        return f"{self.event} to webhook {self.webhook_id} ({self.status})"
