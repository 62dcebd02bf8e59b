"""Agents, their API keys, labels and readers, and the store's own facts."""

import hashlib
import secrets

from django.db import models
from django.utils import timezone

# The schema this code writes and understands; a store whose `schema_version` is newer is refused, not
# guessed.
SCHEMA_VERSION = 1


KEY_PREFIX = "rsk_"


class StoreMeta(models.Model):
    """Key/value facts about the store itself; `schema_version` is the one read on open."""

    key = models.CharField(max_length=100, primary_key=True)
    value = models.TextField()

    class Meta:
        db_table = "store_meta"
        verbose_name = "store fact"

    def __str__(self):
        return f"{self.key}={self.value}"


class Agent(models.Model):
    """An AI agent served by this installation; everything it owns hangs off it."""

    agent_id = models.SlugField(max_length=100, unique=True)
    name = models.CharField(max_length=200, blank=True)
    daily_budget = models.DecimalField(
        max_digits=12,
        decimal_places=4,
        null=True,
        blank=True,
        help_text="Spend per day in the ledger's currency; empty = no budget.",
    )
    runaway_limit = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Model calls per minute before requests are refused with 429; empty = no limit.",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["agent_id"]

    def __str__(self):
        return self.agent_id

    def clean(self):
        from django.core.exceptions import ValidationError

        # A negative budget would count every agent as over it, and silently skip its judge.
        if self.daily_budget is not None and self.daily_budget < 0:
            raise ValidationError({"daily_budget": "a daily budget is at least 0 (empty: no budget)"})


class ApiKeyQuerySet(models.QuerySet):
    def active(self):
        return self.filter(revoked_at__isnull=True)


class ApiKey(models.Model):
    """A bearer key for one agent. Only its SHA-256 is stored; the key is shown once."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="keys")
    name = models.CharField(max_length=100, blank=True)
    prefix = models.CharField(max_length=16, help_text="The first characters, to tell keys apart.")
    hashed = models.CharField(max_length=64, unique=True)
    may_act_for_others = models.BooleanField(
        default=False, help_text="May charge model calls to agents other than its own (onBehalfOf)."
    )
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        verbose_name = "API key"

    def __str__(self):
        return f"{self.prefix}… ({self.agent})"

    @staticmethod
    def hash(raw: str) -> str:
        # Keys are 32 random bytes, so a fast unsalted hash is enough: there is
        # no dictionary to attack, and lookup stays one indexed equality.
        return hashlib.sha256(raw.encode()).hexdigest()

    @staticmethod
    def generate() -> str:
        return KEY_PREFIX + secrets.token_urlsafe(32)


class Label(models.Model):
    """A mark on a paragraph; a reader holding any of a paragraph's labels may read it."""

    name = models.SlugField(max_length=100, unique=True)
    description = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Reader(models.Model):
    """Someone an agent answers for, identified by the installation's own id, holding labels."""

    external_id = models.CharField(max_length=200, unique=True)
    labels = models.ManyToManyField(Label, blank=True, related_name="readers")
    # Set when the identity provider de-provisions the person (SCIM DELETE, or active=false): the
    # reader then holds nothing, and neither a token nor a hand-given label gives it anything.
    withdrawn_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["external_id"]

    def __str__(self):
        return self.external_id

    def hold_only(self, label_ids: set[int]) -> None:
        """Hold exactly `label_ids` (the labels its identity provider's groups give); written only when
        that changes, which a token shown again or a SCIM push repeated usually does not."""
        if set(self.labels.values_list("pk", flat=True)) != label_ids:
            self.labels.set(label_ids)


class IdpGroup(models.Model):
    """A group of the organisation's identity provider, and the labels its members read with: a reader
    named by a signed reader token holds the labels of every group its token lists."""

    name = models.CharField(
        max_length=200, unique=True, help_text="The group as the provider's token names it."
    )
    labels = models.ManyToManyField(Label, blank=True, related_name="idp_groups")
    # The provider's own id for the group, and whether SCIM keeps it (it may also be typed here first
    # and then claimed by the provider's first push of a group of that name).
    external_id = models.CharField(max_length=200, blank=True, editable=False)
    provisioned = models.BooleanField(default=False, editable=False)
    modified_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = "identity provider group"

    def __str__(self):
        return self.name

    @staticmethod
    def labels_given(groups: "models.QuerySet[IdpGroup]") -> set[int]:
        """The labels `groups` map to together (the admin's group -> labels mapping)."""
        return set(groups.values_list("labels", flat=True)) - {None}


class ProvisionedUser(models.Model):
    """A person the identity provider keeps here over SCIM (`/scim/v2/Users`): the reader it names and
    the groups it belongs to. Its reader's labels are those its groups give while it is active."""

    user_name = models.CharField(max_length=200, unique=True)
    external_id = models.CharField(max_length=200, blank=True)
    display_name = models.CharField(max_length=200, blank=True)
    reader = models.OneToOneField(Reader, on_delete=models.PROTECT, related_name="provisioned")
    groups = models.ManyToManyField(IdpGroup, blank=True, related_name="members")
    created_at = models.DateTimeField(auto_now_add=True)
    modified_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["user_name"]

    def __str__(self):
        return self.user_name

    @property
    def active(self) -> bool:
        return self.reader.withdrawn_at is None
