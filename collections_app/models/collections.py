"""Collections, their documents and paragraphs (`agents_chunks`), and what built each."""

import re

import numpy as np
from django.db import models
from django.utils import timezone

from ragsite.analyzers import ANALYZERS, NAME_MAX_LENGTH, SIMPLE

from .. import limits
from ..errors import EmptyBuild
from ..fields import DigestField
from .agents import Agent, Label

# What a path or an address looks like in a description meant for people (seed 000: built_from says
# what the documents are, "the HR share", never where): a token starting like an absolute, home,
# relative, drive or UNC path; any URL; a backslash; or two separators in one word ("srv/shares/hr").
# One slash between words ("HR/Finance", "24/7") is prose.
PATH_LIKE = re.compile(
    r"(?:^|\s)(?:[/~]|\.{1,2}[/\\]|[A-Za-z]:[/\\])"
    r"|[A-Za-z][A-Za-z0-9+.-]*://"
    r"|\\"
    r"|[^\s/]+/[^\s/]+/"
)


def built_from_problem(value: str) -> str | None:
    """Why `value` cannot be a collection's built_from, or None."""
    if len(value) > 200:
        return "built_from is at most 200 characters"
    if PATH_LIKE.search(value):
        return (
            'built_from says what the documents are, for people ("the HR share"), never where they are: '
            "it must not be a path or an address"
        )
    return None


class Collection(models.Model):
    """A named set of documents one agent answers from."""

    MAX_AROUND = limits.MAX_AROUND

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="collections", db_index=False)
    name = models.SlugField(max_length=100)
    built_from = models.CharField(
        max_length=200,
        blank=True,
        help_text='What the documents are, for people: "the HR share". Never a path.',
    )
    folder = models.CharField(
        max_length=100,
        blank=True,
        help_text="The sub-folder of the agent folder in KNOWLEDGE_ROOT that the documents are read from: a "
        "name, never a path. Empty = uploads only (or a KNOWLEDGE_..._FOLDER variable).",
    )
    # Set by staff only (services.knowledge.bind_folder_variable); one per name, whatever the RLS scope.
    folder_variable_bound = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Build from KNOWLEDGE_<NAME>_FOLDER (the variable without an agent). Staff binds it; at "
        "most one collection of a name may be bound. KNOWLEDGE_<AGENT>__<NAME>_FOLDER needs no binding.",
    )
    # Validated against chunking.STRATEGIES rather than fixed as choices, so that a
    # strategy becoming available needs no migration.
    method = models.CharField(max_length=40, default="structure")
    size = models.PositiveIntegerField(null=True, blank=True, help_text="Empty = the method's default.")
    overlap = models.PositiveIntegerField(null=True, blank=True, help_text="Empty = the method's default.")
    per_reader = models.BooleanField(
        default=False, help_text="Searches must name a reader; labels decide what it sees."
    )
    # Validated against analyzers.ANALYZERS rather than fixed as choices (as `method`): a language the
    # stemmer package adds needs no migration. Existing collections keep seed 004's terms.
    analyzer = models.CharField(
        max_length=NAME_MAX_LENGTH,
        default=SIMPLE,
        db_default=SIMPLE,
        help_text="How the keyword leg reads words: simple (seed 004's terms), english and the other "
        "Snowball languages (stemmed: 'policies' finds 'policy'), their _exact forms (english_exact: the "
        "stem and the word as written both count), cjk (Chinese/Japanese/Korean as character pairs). A "
        "change rebuilds the collection.",
    )
    judge = models.BooleanField(default=False, help_text="Ask the judge model whether the paragraphs answer.")
    min_score = models.FloatField(null=True, blank=True, help_text="Floor override; empty = MIN_SCORE.")
    # db_default as well: code from before this column can still insert a collection into this store.
    floor_measured = models.BooleanField(
        default=False,
        db_default=False,
        help_text="Read the floor off the known answers of the latest measured build; until there is one, "
        "the floor override or MIN_SCORE applies.",
    )
    around = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="Around override; empty = AROUND."
    )
    KEEP_LIVE, NEWER_REPLACES = "keep_live", "newer_replaces"
    ON_CONFLICT_CHOICES = [
        (KEEP_LIVE, "keep the live document; the newer one's conflicting paragraphs wait in review"),
        (NEWER_REPLACES, "the newer one replaces the live one's conflicting paragraphs once approved"),
    ]
    on_conflict = models.CharField(
        max_length=20,
        choices=ON_CONFLICT_CHOICES,
        default=KEEP_LIVE,
        db_default=KEEP_LIVE,
        help_text="When a new or changed file contradicts a document already searched.",
    )
    # Why the stored paragraphs no longer match the documents (a document deleted or uploaded since the
    # last build), for people; the next successful build clears it.
    rebuild_needed = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    # Bumped by every build request; a build may commit only while it holds the latest (its lease).
    build_generation = models.PositiveIntegerField(default=0, editable=False)

    class Meta:
        ordering = ["agent__agent_id", "name"]
        constraints = [
            models.UniqueConstraint(fields=["agent", "name"], name="collection_unique_per_agent"),
            models.UniqueConstraint(
                fields=["name"],
                condition=models.Q(folder_variable_bound=True),
                name="collection_one_bound_per_name",
            ),
        ]

    def __str__(self):
        return f"{self.agent.agent_id}/{self.name}"

    def clean(self):
        from django.core.exceptions import ValidationError

        from ..text.chunking import ChunkingError, resolve_sizes

        errors = {}
        try:
            resolve_sizes(self.method, self.size, self.overlap)
        except ChunkingError as exc:
            errors["method"] = str(exc)
        problem = built_from_problem(self.built_from or "")
        if problem:
            errors["built_from"] = problem
        if self.analyzer not in ANALYZERS:
            errors["analyzer"] = f"the analyzer is one of {', '.join(ANALYZERS)}"
        # The overrides obey the same ranges as MIN_SCORE and AROUND: a floor above 1 would answer
        # nothing to every question, silently.
        if self.min_score is not None and not 0 <= self.min_score <= 1:
            errors["min_score"] = "the floor is a number from 0 to 1 (0 turns it off; empty: MIN_SCORE)"
        if self.around is not None and not 0 <= self.around <= self.MAX_AROUND:
            errors["around"] = f"around is a whole number from 0 to {self.MAX_AROUND} (empty: AROUND)"
        if errors:
            raise ValidationError(errors)

    def floor_in_force(self, *, measured: float | None, default: float) -> tuple[float, str]:
        """The floor this collection answers at when a request sets none, and its `floor_source`.

        ``measured`` is the floor read off its known answers (used only when `floor_measured`
        is set, and only once there is one); then its own override; then ``default`` (MIN_SCORE).
        Never a measured floor per reader: it would move with paragraphs the reader may not read.
        """
        if self.floor_measured and measured is not None and not self.per_reader:
            return measured, "measured"
        if self.min_score is not None:
            return self.min_score, "collection"
        return default, "default"

    def chunk_sizes(self) -> tuple[int | None, int]:
        """(size, overlap) the chunker will use: this collection's, or the method's defaults."""
        from ..text.chunking import resolve_sizes

        return resolve_sizes(self.method, self.size, self.overlap)


def upload_to(instance, filename):
    return f"uploads/{instance.collection.agent.agent_id}/{instance.collection.name}/{filename}"


class Document(models.Model):
    """One source document of a collection, named relative to its source, never by path."""

    ACTIVE, NEEDS_REVIEW, REFUSED = "active", "needs_review", "refused"
    STATUS_CHOICES = [(ACTIVE, "active"), (NEEDS_REVIEW, "needs review"), (REFUSED, "refused")]
    FOLDER, UPLOAD = "folder", "upload"

    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, related_name="documents", db_index=False
    )
    name = models.CharField(max_length=500)
    source = models.CharField(max_length=10, choices=[(FOLDER, "folder"), (UPLOAD, "upload")], default=FOLDER)
    upload = models.FileField(upload_to=upload_to, null=True, blank=True, max_length=500)
    fingerprint = models.CharField(max_length=64, blank=True, help_text="SHA-256 of the file's bytes.")
    # A remote source's change token for the version built (an ETag, a git blob id): the same token
    # again is the same bytes, so neither a sync check nor a build downloads it (services.origins).
    source_token = models.CharField(max_length=200, blank=True, default="", db_default="")
    # The readers its source gives it (an S3 tag, a path rule, a file's group: group names), and the
    # label ids they mapped to through the identity-provider groups when it was built. Its paragraphs
    # hold those labels beside the ones people set (SourceLabel records which links are the source's).
    source_readers = models.JSONField(default=list, blank=True, db_default=[])
    source_labels = models.JSONField(default=list, blank=True, db_default=[])
    status = models.CharField(max_length=20, choices=STATUS_CHOICES, default=ACTIVE)
    approved_fingerprint = models.CharField(
        max_length=64,
        blank=True,
        help_text="The version a person approved; a changed file needs approval again.",
    )
    paragraph_count = models.PositiveIntegerField(default=0)
    ocr_pages = models.PositiveIntegerField(
        default=0, db_default=0, help_text="Pages the last build read by OCR."
    )
    summary = models.TextField(blank=True)
    scan_warnings = models.JSONField(default=list, blank=True)
    # What a reader of the document page should know about how it was read, without sending it to review
    # (a sheet's formulas with no saved value, text cut at the limit).
    read_notes = models.JSONField(default=list, blank=True, db_default=[])
    conflicts = models.JSONField(default=list, blank=True)
    attributes = models.JSONField(
        default=dict, blank=True, db_default={}
    )  # from <name>.meta.json: index.filters
    default_labels = models.ManyToManyField(Label, blank=True, related_name="documents")
    enabled = models.BooleanField(
        default=True,
        help_text="A disabled document is never searched or stitched; it stays disabled across rebuilds.",
    )
    # One of extract.REFUSAL_REASONS when the last build refused it; the detail is only in the server log.
    refusal = models.CharField(max_length=40, blank=True)
    approved_by = models.CharField(max_length=150, blank=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    # What the current paragraphs were made with: a document is reused only when all match.
    built_method = models.CharField(max_length=40, blank=True)
    built_size = models.PositiveIntegerField(null=True, blank=True)
    built_overlap = models.PositiveIntegerField(null=True, blank=True)
    built_model = models.CharField(max_length=200, blank=True)
    # The version of `context.py`'s representation its paragraphs were indexed with (0: none).
    # A database default, so a store stays writable by code that predates the column.
    built_context = models.PositiveSmallIntegerField(default=0, db_default=0)
    # Active, with some paragraphs waiting in review (Paragraph.in_review): they contradict a paragraph of
    # another document, while the rest of this one answers. Status needs_review holds the whole document.
    review_paragraphs = models.BooleanField(default=False, db_default=False)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["collection", "name"]
        constraints = [models.UniqueConstraint(fields=["collection", "name"], name="document_unique_name")]
        # Every search asks which documents are held back from it (in review, refused, switched off).
        # They are few, so the partial index holds only them: its condition is the search's own
        # filter (services.search.plan.readable_mask), so the planner reads just those rows instead of
        # every document of the collection (10,000 at 100k paragraphs: 2-10 ms a search).
        indexes = [
            models.Index(fields=["collection", "status"], name="document_by_status"),
            models.Index(
                fields=["collection"],
                condition=~models.Q(status="active") | models.Q(enabled=False),
                name="document_held_back",
            ),
        ]

    def __str__(self):
        return self.name


class ParagraphManager(models.Manager):
    def searchable(self, collection):
        """The paragraphs a search reads: those of documents in search (not in review, not refused), less
        those held for review one by one."""
        return self.filter(collection=collection, document__status=Document.ACTIVE, in_review=False)

    def guard_not_empty(self, collection, *, was_searchable: bool = True) -> None:
        """The store's own refusal to hold a built collection that readers could not search.

        Called inside the build's transaction after the swap, so raising rolls the
        swap back and the old paragraphs keep answering. The build service refuses
        first; this catches any other path that could empty a collection. Rows that no
        search reads (all in review) count as empty when they would replace a collection
        that was searchable (``was_searchable``, taken before the swap); otherwise they are
        let through, so a person can review them.
        """
        if not self.filter(collection=collection).exists():
            raise EmptyBuild(f'refusing to leave collection "{collection.name}" with no paragraphs')
        if was_searchable and not self.searchable(collection).exists():
            raise EmptyBuild(
                f'refusing to replace collection "{collection.name}" with paragraphs no search reads '
                "(every document needs review)"
            )


class Paragraph(models.Model):
    """One searchable piece of a document (the seeds' "passage")."""

    # No index of its own on agent_id or collection: every query of paragraphs names its collection,
    # which paragraph_by_ordinal leads with (each index costs 10-16 bytes a row).
    agent_id = models.CharField(max_length=100)
    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, related_name="paragraphs", db_index=False
    )
    document = models.ForeignKey(Document, on_delete=models.CASCADE, related_name="paragraphs")
    ordinal = models.PositiveIntegerField(help_text="Position across the whole collection.")
    index = models.PositiveIntegerField(help_text="Position within its document: the k of doc#k.")
    section = models.CharField(max_length=300, blank=True)
    # "title › section › subsection": indexed beside the text (lexical and vector), never returned as it.
    context = models.CharField(max_length=600, blank=True, default="", db_default="")
    text = models.TextField()
    start_char = models.PositiveIntegerField()
    end_char = models.PositiveIntegerField()
    # The first and last page (PDF page, slide, sheet) the paragraph's text is on; null: no pages.
    page_first = models.PositiveIntegerField(null=True, blank=True)
    page_last = models.PositiveIntegerField(null=True, blank=True)
    token_count = models.PositiveIntegerField(null=True, blank=True)
    fingerprint = DigestField(help_text="SHA-256 of the text (32 bytes in the row, hex in Python).")
    # float16 little-endian, one vector per window of the model (usually one): see vector_codec.
    embedding = models.BinaryField(null=True, blank=True)
    # With ENTRIES: one vector (float16, as `embedding`) per entry of a list, table or Q/A run the
    # paragraph holds (text.entries.entry_spans), in order; null: none, or built without entries.
    entry_embedding = models.BinaryField(null=True, blank=True)
    labels = models.ManyToManyField(Label, blank=True, related_name="paragraphs")
    enabled = models.BooleanField(
        default=True,
        help_text="A disabled paragraph is never searched or stitched; kept across rebuilds by its text.",
    )
    # Held for review: it contradicts a paragraph of another document (its numbers differ), so it waits
    # for a person while the rest of its document answers. Set by the build, cleared by an approval.
    in_review = models.BooleanField(default=False, db_default=False)

    objects = ParagraphManager()

    class Meta:
        db_table = "agents_chunks"
        ordering = ["collection", "ordinal"]
        indexes = [
            models.Index(fields=["collection", "ordinal"], name="paragraph_by_ordinal"),
            # Every search lists a collection's disabled paragraphs; they are few, so index only them.
            models.Index(
                fields=["collection"],
                condition=models.Q(enabled=False) | models.Q(in_review=True),
                name="paragraph_disabled",
            ),
        ]

    def __str__(self):
        return self.chunk_id

    @property
    def chunk_id(self) -> str:
        """Seed 004's citation id, ``<document>#<k>`` with k counted within the document from 0."""
        return f"{self.document.name}#{self.index}"

    def vectors(self, dimensions: int) -> np.ndarray | None:
        """The paragraph's vectors as (windows, dimensions) float32; None when it was not embedded."""
        from ..index.vector_codec import decode

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
    # The analyzer this build's index was written with (the collection's when it was built), which its
    # searches ask with: a changed collection analyzer applies from its rebuild on, never half-way.
    analyzer = models.CharField(max_length=NAME_MAX_LENGTH, default=SIMPLE, db_default=SIMPLE)
    # The interchange index_id this build came from (import_index), which seeds the IVF's k-means++
    # (seed 004: fnv1a64(index_id)) whatever name it was imported under; blank: the collection's name.
    index_id = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        db_table = "collection_built"
        verbose_name = "collection build record"

    def __str__(self):
        return f"{self.collection} built {self.built_at:%Y-%m-%d %H:%M}"

    @property
    def ivf_index_id(self) -> str:
        return self.index_id or self.collection.name
