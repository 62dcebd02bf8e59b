"""The history of builds and measurements: one row per attempt."""

from django.db import models
from django.utils import timezone

from .collections import Collection


class BuildRun(models.Model):
    """One build attempt, kept as history, with the progress a person watches."""

    QUEUED, RUNNING, SUCCEEDED, FAILED, REFUSED = "queued", "running", "succeeded", "failed", "refused"
    # Went live, and put something in review that waits for a person (documents or paragraphs held).
    SUCCEEDED_WITH_REVIEW = "succeeded_with_review"
    STATUS_CHOICES = [(s, s) for s in (QUEUED, RUNNING, SUCCEEDED, SUCCEEDED_WITH_REVIEW, FAILED, REFUSED)]
    LIVE = (SUCCEEDED, SUCCEEDED_WITH_REVIEW)  # the statuses of a build that went live

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="runs")
    status = models.CharField(max_length=24, choices=STATUS_CHOICES, default=QUEUED, db_index=True)
    requested_by = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # Failed for a reason that may pass (its worker died, the store was busy, the embedder unreachable):
    # a synced folder's state is built again later (services.sync_check), with backoff.
    transient = models.BooleanField(default=False, db_default=False)
    # Documents this build left waiting in review, wholly or for some paragraphs.
    documents_in_review = models.PositiveIntegerField(default=0, db_default=0)
    # The collection's own count of builds (1 for its first), for people: "build 3 of handbook". URLs and
    # the API keep the id, which is unique across collections.
    number = models.PositiveIntegerField(default=0, db_default=0)
    # The collection's build_generation when this build was requested: with the id, its lease.
    generation = models.PositiveIntegerField(default=0, editable=False)
    documents_total = models.PositiveIntegerField(default=0)
    documents_done = models.PositiveIntegerField(default=0)
    paragraphs_total = models.PositiveIntegerField(default=0)
    paragraphs_done = models.PositiveIntegerField(default=0)
    documents_read = models.PositiveIntegerField(default=0)
    documents_reused = models.PositiveIntegerField(default=0)
    # Of those reused, how many had their source's labels changed (re-labelled, not read again).
    documents_relabelled = models.PositiveIntegerField(default=0, db_default=0)
    ocr_pages = models.PositiveIntegerField(default=0, db_default=0)  # pages this build read by OCR
    documents_refused = models.PositiveIntegerField(default=0)
    passages = models.PositiveIntegerField(default=0)
    paragraphs_embedded = models.PositiveIntegerField(default=0)
    model = models.CharField(max_length=200, blank=True)
    previous_model = models.CharField(max_length=200, blank=True)
    dimensions = models.PositiveIntegerField(null=True, blank=True)
    refused = models.JSONField(null=True, blank=True)
    # {document name: category from extract.REFUSAL_REASONS}, for people; `refused` stays names only.
    refusal_reasons = models.JSONField(default=dict, blank=True)
    warnings = models.JSONField(default=list, blank=True)
    problems = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        get_latest_by = "created_at"

    def __str__(self):
        return f"build {self.number or self.pk} of {self.collection} ({self.status})"

    @property
    def percent(self) -> int:
        """How far the build is, never going backwards: reading is the first half, embedding the second.

        The number of paragraphs to embed is only known once every document is read, so
        dividing all work done by all work known would reach 100 and then fall back.
        """
        if self.status in self.LIVE:
            return 100
        read = self.documents_done / self.documents_total if self.documents_total else 0.0
        if not self.paragraphs_total:
            return int(50 * min(read, 1.0))
        return min(
            99, int(50 + 50 * min(self.paragraphs_done / self.paragraphs_total, 1.0))
        )  # 100: succeeded


class MeasureRun(models.Model):
    """One measurement of a collection, run by a task: its input, progress and stored report."""

    QUEUED, RUNNING, SUCCEEDED, FAILED = "queued", "running", "succeeded", "failed"
    STATUS_CHOICES = [(s, s) for s in (QUEUED, RUNNING, SUCCEEDED, FAILED)]

    collection = models.ForeignKey(Collection, on_delete=models.CASCADE, related_name="measure_runs")
    status = models.CharField(max_length=20, choices=STATUS_CHOICES, default=QUEUED, db_index=True)
    requested_by = models.CharField(max_length=150, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # What was asked: {"questions": [...], "controls": [...], "most": n, "min_score": x | null}.
    request = models.JSONField(default=dict)
    variants_total = models.PositiveIntegerField(default=0)
    variants_done = models.PositiveIntegerField(default=0)
    report = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"measure {self.pk} of {self.collection} ({self.status})"

    @property
    def percent(self) -> int:
        if self.status == self.SUCCEEDED:
            return 100
        return int(100 * self.variants_done / self.variants_total) if self.variants_total else 0
