"""An agent's long memory: memories, episodes, and the record nodes that divide the long ones.

A memory and an episode are both a *record*: one text of at most `MAX_TEXT_LENGTH` characters
owned by one agent. (Seed 002 calls an episode's text its "summary"; here both kinds name it
`text`, so every path treats the two alike.) A record whose text runs past the embedder's token
window is divided into `RecordNode` rows: offsets into the record's text, never a copy of it.

Ids are never reused, so a node can never come to point at a different record: on SQLite Django
declares an auto field `INTEGER PRIMARY KEY AUTOINCREMENT`, and on PostgreSQL an identity
column, whose sequence never hands out a number twice (both are pinned by a test).
"""

from __future__ import annotations

import secrets
from typing import ClassVar

import numpy as np
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Length
from django.db.models.lookups import GreaterThan, LessThanOrEqual
from django.utils import timezone

from collections_app.models import Agent

# The store's limit on one record's text, in characters (seed 002 §7 keeps it).
MAX_TEXT_LENGTH = 16_000

# The parent_kind values of record_nodes, as seed 002 names them.
MEMORY = "mem"
EPISODE = "ep"
KINDS = (MEMORY, EPISODE)

# A record's tags: at most this many, each 1 to TAG_MAX_LENGTH characters (services.common.validate_tags).
MAX_TAGS = 20
TAG_MAX_LENGTH = 64


def text_length_constraint(table: str) -> models.CheckConstraint:
    """1 to MAX_TEXT_LENGTH characters, enforced by the database as well as by the services."""
    length = Length("text")
    return models.CheckConstraint(
        condition=GreaterThan(length, 0) & LessThanOrEqual(length, MAX_TEXT_LENGTH),
        name=f"{table}_text_length",
    )


def validity_constraint(table: str) -> models.CheckConstraint:
    """A validity that ends after it starts (either end may be open), enforced by the database too."""
    return models.CheckConstraint(
        condition=Q(valid_from__isnull=True)
        | Q(valid_until__isnull=True)
        | Q(valid_from__lt=F("valid_until")),
        name=f"{table}_validity",
    )


class Record(models.Model):
    """What a memory and an episode share. Abstract: each kind has its own table."""

    KIND: ClassVar[str]

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="+")
    text = models.TextField()
    token_count = models.PositiveIntegerField(
        null=True,
        blank=True,
        help_text="Model tokens of the whole text, counted by embedding_model; empty = unknown.",
    )
    # float32 little-endian, L2-normalised; empty when the store has no embedding model.
    embedding = models.BinaryField(null=True, blank=True)
    embedding_model = models.CharField(max_length=200, blank=True, default="")
    locked = models.BooleanField(
        default=False, help_text="A locked record's text cannot be changed or deleted."
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now)
    # When what the record states holds, as the agent said: [valid_from, valid_until), either end open.
    # Recall's `valid_at` keeps the records valid at a moment; of two records stating one slot with
    # different values, the one valid (else created) later supersedes the other (docs/memory.md).
    valid_from = models.DateTimeField(null=True, blank=True)
    valid_until = models.DateTimeField(null=True, blank=True)
    tags = models.JSONField(
        default=list, blank=True, help_text=f"At most {MAX_TAGS} strings of 1-{TAG_MAX_LENGTH} characters."
    )

    class Meta:
        abstract = True

    def __str__(self):
        return f"{self.KIND}:{self.pk}"

    @property
    def kind(self) -> str:
        return self.KIND

    @property
    def stated_at(self):
        """When what it states began to hold: `valid_from` when given, else `created_at`."""
        return self.valid_from or self.created_at

    @property
    def vector(self) -> np.ndarray | None:
        if self.embedding is None:
            return None
        return np.frombuffer(bytes(self.embedding), dtype="<f4")


class Memory(Record):
    """Something an agent chose to remember."""

    KIND = MEMORY

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="memories")

    class Meta:
        db_table = "memories"
        ordering = ["created_at", "id"]
        verbose_name_plural = "memories"
        constraints = [text_length_constraint("memories"), validity_constraint("memories")]


class Episode(Record):
    """The summary of something that happened (seed 002's episode `summary`, named `text` here)."""

    KIND = EPISODE

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="episodes")

    class Meta:
        db_table = "episodes"
        ordering = ["created_at", "id"]
        constraints = [text_length_constraint("episodes"), validity_constraint("episodes")]


RECORD_MODELS: dict[str, type[Record]] = {MEMORY: Memory, EPISODE: Episode}


class RecordNode(models.Model):
    """One span of a long record, small enough to be embedded whole (seed 002 §1, column for column).

    The node's text is `parent.text[start_char:end_char]`. Rows are written only by
    `services.build_nodes` and deleted by database triggers when the parent is deleted or its
    text changes (`memory_app.triggers`). `parent_id` is not a foreign key because it points
    into one of two tables, chosen by `parent_kind`.
    """

    pk = models.CompositePrimaryKey("parent_kind", "parent_id", "node_index")
    parent_kind = models.TextField(choices=[(MEMORY, "memory"), (EPISODE, "episode")])
    parent_id = models.BigIntegerField()
    node_index = models.IntegerField(help_text="0, 1, 2, … in text order.")
    start_char = models.IntegerField(help_text="Inclusive offset into the parent's text.")
    end_char = models.IntegerField(help_text="Exclusive offset.")
    token_count = models.IntegerField(help_text="Tokens of this span, as counted by the embedder.")
    window = models.IntegerField(help_text="The token window the span was cut against.")
    embedding = models.BinaryField(null=True, blank=True)
    embedding_model = models.TextField(default="", db_default="", blank=True)

    class Meta:
        db_table = "record_nodes"
        ordering = ["parent_kind", "parent_id", "node_index"]
        verbose_name = "record node"

    def __str__(self):
        return f"{self.parent_kind}:{self.parent_id}#{self.node_index}"

    @property
    def vector(self) -> np.ndarray | None:
        if self.embedding is None:
            return None
        return np.frombuffer(bytes(self.embedding), dtype="<f4")


class NodePassages(models.Model):
    """The passages of one node: spans of about a sentence (`nodes.PASSAGE_WINDOW` tokens) and their vectors.

    A fact is often a tenth of a node, and the node's one vector dilutes it (docs/decisions/0026);
    recall scores a node by the best of itself and its passages. Kept beside `record_nodes`, whose
    columns are seed 002's, under the same key. Written only by `services.build_nodes`, in the
    transaction that writes the node; a row whose node is gone (its record deleted or changed, the
    triggers having removed the node) matches nothing and is replaced by the next build.
    """

    pk = models.CompositePrimaryKey("parent_kind", "parent_id", "node_index")
    parent_kind = models.TextField(choices=[(MEMORY, "memory"), (EPISODE, "episode")])
    parent_id = models.BigIntegerField()
    node_index = models.IntegerField()
    bounds = models.BinaryField(
        help_text="The node's start, then each passage's end: offsets in the parent's text, int32."
    )
    embeddings = models.BinaryField(
        null=True, blank=True, help_text="One float16 vector per passage (half the bytes; scored in float32)."
    )
    embedding_model = models.TextField(default="", blank=True)

    class Meta:
        db_table = "record_node_passages"
        verbose_name_plural = "node passages"

    def __str__(self):
        return f"{self.parent_kind}:{self.parent_id}#{self.node_index} passages"

    @property
    def spans(self) -> list[tuple[int, int]]:
        """(start, end) of each passage in the parent's text; the first starts where its node does."""
        bounds = np.frombuffer(bytes(self.bounds), dtype="<i4").tolist()
        return list(zip(bounds[:-1], bounds[1:], strict=True))


def new_epoch() -> str:
    return secrets.token_hex(8)


class RecallGeneration(models.Model):
    """A counter per agent, raised in the same transaction as every write to its records or their nodes.

    Each process caches an agent's recall index (texts, BM25, vectors, nodes) and rebuilds it when
    this number has moved: one primary-key read per recall instead of reading 100,000 records.
    """

    agent = models.OneToOneField(Agent, on_delete=models.CASCADE, primary_key=True, related_name="+")
    generation = models.BigIntegerField(default=0)
    # The last few generations and the records each changed: [[generation, [[kind, id], ...]], ...],
    # the list null when the write did not say (a bulk import). A process whose cached index is only
    # a few generations behind re-reads just those records instead of all of them.
    recent = models.JSONField(default=list, blank=True)
    # Drawn when the row is made: generations are comparable only within one epoch (a row made again
    # — a rolled-back test database, an agent deleted and made again — starts another history).
    epoch = models.CharField(max_length=32, default=new_epoch)

    class Meta:
        db_table = "memory_recall_generation"

    def __str__(self):
        return f"{self.agent_id}: {self.generation}"
