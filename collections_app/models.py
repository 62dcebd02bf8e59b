"""The store: agents and their keys, collections, documents, paragraphs, builds, readers and the ledger.

Table names follow the seeds where the seeds name them (`store_meta`,
`agents_chunks`, `collection_built`). Every paragraph row carries `agent_id`,
so one installation serves many agents and a row always says whose it is.
"""

import hashlib
import secrets

import numpy as np
from django.db import models
from django.utils import timezone

from ragsite.errors import RagsiteError

# The schema this code writes and understands. A store whose `schema_version`
# is newer was written by a newer ragsite and is refused, never guessed at.
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
        max_digits=12, decimal_places=4, null=True, blank=True, help_text="Spend per day in the ledger's currency; empty = no budget."
    )
    runaway_limit = models.PositiveIntegerField(
        null=True, blank=True, help_text="Model calls per minute before requests are refused with 429; empty = no limit."
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["agent_id"]

    def __str__(self):
        return self.agent_id


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

    class Meta:
        ordering = ["external_id"]

    def __str__(self):
        return self.external_id


class Collection(models.Model):
    """A named set of documents one agent answers from."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="collections")
    name = models.SlugField(max_length=100)
    built_from = models.CharField(
        max_length=200, blank=True, help_text='What the documents are, for people: "the HR share". Never a path.'
    )
    # Validated against chunking.STRATEGIES rather than fixed as choices, so that a
    # strategy becoming available needs no migration.
    method = models.CharField(max_length=40, default="structure")
    size = models.PositiveIntegerField(null=True, blank=True, help_text="Empty = the method's default.")
    overlap = models.PositiveIntegerField(null=True, blank=True, help_text="Empty = the method's default.")
    per_reader = models.BooleanField(default=False, help_text="Searches must name a reader; labels decide what it sees.")
    judge = models.BooleanField(default=False, help_text="Ask the judge model whether the paragraphs answer.")
    min_score = models.FloatField(null=True, blank=True, help_text="Floor override; empty = MIN_SCORE.")
    around = models.PositiveSmallIntegerField(null=True, blank=True, help_text="Around override; empty = AROUND.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["agent__agent_id", "name"]
        constraints = [models.UniqueConstraint(fields=["agent", "name"], name="collection_unique_per_agent")]

    def __str__(self):
        return f"{self.agent.agent_id}/{self.name}"

    def clean(self):
        from django.core.exceptions import ValidationError

        from .chunking import ChunkingError, resolve_sizes

        try:
            resolve_sizes(self.method, self.size, self.overlap)
        except ChunkingError as exc:
            raise ValidationError({"method": str(exc)}) from exc

    def chunk_sizes(self) -> tuple[int | None, int]:
        """(size, overlap) the chunker will use: this collection's, or the method's defaults."""
        from .chunking import resolve_sizes

        return resolve_sizes(self.method, self.size, self.overlap)


def upload_to(instance, filename):
    return f"uploads/{instance.collection.agent.agent_id}/{instance.collection.name}/{filename}"


class Document(models.Model):
    """One source document of a collection, named relative to its source, never by path."""

    ACTIVE, NEEDS_REVIEW, REFUSED = "active", "needs_review", "refused"
    STATUS_CHOICES = [(ACTIVE, "active"), (NEEDS_REVIEW, "needs review"), (REFUSED, "refused")]
    FOLDER, UPLOAD = "folder", "upload"

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="documents")
    name = models.CharField(max_length=500)
    source = models.CharField(max_length=10, choices=[(FOLDER, "folder"), (UPLOAD, "upload")], default=FOLDER)
    upload = models.FileField(upload_to=upload_to, null=True, blank=True, max_length=500)
    fingerprint = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the file's bytes.")
    status = models.CharField(max_length=20, choices=STATUS_CHOICES, default=ACTIVE)
    approved_fingerprint = models.CharField(
        max_length=64, blank=True, help_text="The version a person approved; a changed file needs approval again."
    )
    paragraph_count = models.PositiveIntegerField(default=0)
    summary = models.TextField(blank=True)
    scan_warnings = models.JSONField(default=list, blank=True)
    conflicts = models.JSONField(default=list, blank=True)
    default_labels = models.ManyToManyField(Label, blank=True, related_name="documents")
    # What the current paragraphs were made with: a document is reused only when all match.
    built_method = models.CharField(max_length=40, blank=True)
    built_size = models.PositiveIntegerField(null=True, blank=True)
    built_overlap = models.PositiveIntegerField(null=True, blank=True)
    built_model = models.CharField(max_length=200, blank=True)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["collection", "name"]
        constraints = [models.UniqueConstraint(fields=["collection", "name"], name="document_unique_name")]
        # Every search asks which documents are held back from it (in review, refused).
        indexes = [models.Index(fields=["collection", "status"], name="document_by_status")]

    def __str__(self):
        return self.name


class EmptyBuild(RagsiteError):
    """A build would leave the collection with no paragraphs; the old ones keep answering."""

    code = "empty_build"
    status = 409


class ParagraphManager(models.Manager):
    def guard_not_empty(self, collection) -> None:
        """The store's own refusal to hold a built collection with no paragraphs.

        Called inside the build's transaction after the swap, so raising rolls the
        swap back and the old paragraphs keep answering. The build service refuses
        first; this catches any other path that could empty a collection.
        """
        if not self.filter(collection=collection).exists():
            raise EmptyBuild(f'refusing to leave collection "{collection.name}" with no paragraphs')


class Paragraph(models.Model):
    """One searchable piece of a document (the seeds' "passage")."""

    agent_id = models.CharField(max_length=100, db_index=True)
    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="paragraphs")
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="paragraphs")
    ordinal = models.PositiveIntegerField(help_text="Position across the whole collection.")
    index = models.PositiveIntegerField(help_text="Position within its document: the k of doc#k.")
    section = models.CharField(max_length=300, blank=True)
    text = models.TextField()
    start_char = models.PositiveIntegerField()
    end_char = models.PositiveIntegerField()
    token_count = models.PositiveIntegerField(null=True, blank=True)
    fingerprint = models.CharField(max_length=64)
    # float16 little-endian, one vector per window of the model (usually one): see vector_codec.
    embedding = models.BinaryField(null=True, blank=True)
    labels = models.ManyToManyField(Label, blank=True, related_name="paragraphs")

    objects = ParagraphManager()

    class Meta:
        db_table = "agents_chunks"
        ordering = ["collection", "ordinal"]
        indexes = [models.Index(fields=["collection", "ordinal"], name="paragraph_by_ordinal")]

    def __str__(self):
        return f"{self.document.name}#{self.index}"

    def vectors(self, dimensions: int) -> np.ndarray | None:
        """The paragraph's vectors as (windows, dimensions) float32; None when it was not embedded."""
        from .vector_codec import decode

        return None if self.embedding is None else decode(self.embedding, dimensions)


class CollectionBuilt(models.Model):
    """What built a collection, and when: one row per collection. No row = never built."""

    collection = models.OneToOneField(Collection, on_delete=models.CASCADE, related_name="built")
    agent_id = models.CharField(max_length=100)
    model = models.CharField(max_length=200)
    dimensions = models.PositiveIntegerField()
    method = models.CharField(max_length=40)
    built_from = models.CharField(max_length=200, blank=True)
    passages = models.PositiveIntegerField()
    built_at = models.DateTimeField()
    # null: nobody recorded; []: nothing refused; ["a.pdf", …]: names only, never reasons or paths.
    refused = models.JSONField(null=True, blank=True)

    class Meta:
        db_table = "collection_built"
        verbose_name = "collection build record"

    def __str__(self):
        return f"{self.collection} built {self.built_at:%Y-%m-%d %H:%M}"


class BuildRun(models.Model):
    """One build attempt, kept as history, with the progress a person watches."""

    QUEUED, RUNNING, SUCCEEDED, FAILED, REFUSED = "queued", "running", "succeeded", "failed", "refused"
    STATUS_CHOICES = [(s, s) for s in (QUEUED, RUNNING, SUCCEEDED, FAILED, REFUSED)]

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=20, choices=STATUS_CHOICES, default=QUEUED, db_index=True)
    requested_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    documents_total = models.PositiveIntegerField(default=0)
    documents_done = models.PositiveIntegerField(default=0)
    paragraphs_total = models.PositiveIntegerField(default=0)
    paragraphs_done = models.PositiveIntegerField(default=0)
    documents_read = models.PositiveIntegerField(default=0)
    documents_reused = models.PositiveIntegerField(default=0)
    documents_refused = models.PositiveIntegerField(default=0)
    passages = models.PositiveIntegerField(default=0)
    paragraphs_embedded = models.PositiveIntegerField(default=0)
    model = models.CharField(max_length=200, blank=True)
    previous_model = models.CharField(max_length=200, blank=True)
    dimensions = models.PositiveIntegerField(null=True, blank=True)
    refused = models.JSONField(null=True, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    problems = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        get_latest_by = "created_at"

    def __str__(self):
        return f"build {self.pk} of {self.collection} ({self.status})"

    @property
    def percent(self) -> int:
        """How far the build is, never going backwards: reading is the first half, embedding the second.

        The number of paragraphs to embed is only known once every document is read, so
        dividing all work done by all work known would reach 100 and then fall back.
        """
        if self.status == self.SUCCEEDED:
            return 100
        read = self.documents_done / self.documents_total if self.documents_total else 0.0
        if not self.paragraphs_total:
            return int(50 * min(read, 1.0))
        return int(50 + 50 * min(self.paragraphs_done / self.paragraphs_total, 1.0))


class ModelCall(models.Model):
    """The ledger: one model call charged to one agent. Never the question, never a paragraph."""

    JUDGE, EMBED = "judge", "embed"

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="model_calls")
    collection = models.ForeignKey(Collection, on_delete=models.SET_NULL, null=True, blank=True)
    purpose = models.CharField(max_length=20, choices=[(JUDGE, "judge"), (EMBED, "embed")])
    model = models.CharField(max_length=200)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "model call"

    def __str__(self):
        return f"{self.purpose} for {self.agent} ({self.model})"
