"""A collection's questions with known answers, and what each build answered."""

from django.db import models
from django.utils import timezone

from .collections import Collection
from .runs import BuildRun


class KnownAnswer(models.Model):
    """One of a collection's known-answer questions, or a control (``answer`` empty): the librarian's own.

    Kept in the librarian's order (``position``); never logged, never in the ledger.
    """

    collection = models.ForeignKey(
        Collection, on_delete=models.CASCADE, related_name="known_answers", db_index=False
    )
    position = models.PositiveIntegerField()
    question = models.TextField()
    # A marker is at least one character, so an empty one can only mean a control.
    answer = models.TextField(blank=True, help_text="Text the answering paragraph holds; empty = a control.")

    class Meta:
        ordering = ["collection", "position"]
        constraints = [
            models.UniqueConstraint(fields=["collection", "position"], name="known_answer_position")
        ]

    def __str__(self):
        return f"{self.collection} #{self.position}"

    @property
    def control(self) -> bool:
        return not self.answer


class KnownAnswersReportQuerySet(models.QuerySet):
    def of_live_builds(self):
        """Reports that measured a build which went live (not a refused candidate, not a failure)."""
        return self.filter(status=KnownAnswersReport.MEASURED, build__status__in=BuildRun.LIVE)

    def measured_floor(self) -> float | None:
        """The floor read off the latest live build's known answers (``collection.known_answer_reports``),
        or None when there is none."""
        return self.of_live_builds().order_by("-build_id").values_list("measured_floor", flat=True).first()


class KnownAnswersReport(models.Model):
    """How one build did on its collection's known answers: the one row the measurement writes.

    Measured by a task after the build commits, or, with KNOWN_ANSWERS_GATE set, from the candidate's
    rows before the swap (then a refused build has a report too, saying what it would have lost).
    """

    MEASURED, FAILED = "measured", "failed"

    build = models.OneToOneField(BuildRun, on_delete=models.CASCADE, related_name="known_answers_report")
    collection = models.ForeignKey(
        Collection, models.CASCADE, related_name="known_answer_reports", db_index=False
    )
    status = models.CharField(max_length=20, choices=[(MEASURED, "measured"), (FAILED, "failed")])
    measured_at = models.DateTimeField(default=timezone.now)
    answers = models.PositiveIntegerField(default=0, help_text="Questions with an answer marker.")
    controls = models.PositiveIntegerField(default=0)
    found_at_1 = models.PositiveIntegerField(null=True, blank=True)
    found_at_5 = models.PositiveIntegerField(null=True, blank=True)
    floor = models.FloatField(null=True, blank=True, help_text="The floor found@1/@5 were taken at.")
    floor_source = models.CharField(max_length=20, blank=True)
    lowest_answer = models.FloatField(null=True, blank=True)
    highest_control = models.FloatField(null=True, blank=True)
    separates = models.BooleanField(null=True, blank=True)
    measured_floor = models.FloatField(null=True, blank=True)
    results = models.JSONField(default=list, blank=True)
    lost = models.JSONField(
        default=list, blank=True, help_text="Questions the previous live build found and this one does not."
    )
    warnings = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)

    objects = KnownAnswersReportQuerySet.as_manager()

    class Meta:
        ordering = ["-build_id"]
        indexes = [models.Index(fields=["collection", "status", "build"], name="known_report_by_collection")]

    def __str__(self):
        return f"known answers of {self.build}"
