"""The admin's measure pages: paste questions, queue a measurement (a django-q task), watch its bar,
read the stored report — a line per variant, a chart, the questions per variant folded away — and the
history of a collection's measurements.

`MeasureAdminMixin` adds the pages to `CollectionAdmin`; the views only parse the form, call the
service, and lay the stored report out for the template.
"""

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone

from ragsite.errors import RagsiteError

from ..limits import MAX_MOST, MAX_QUESTION_CHARS
from ..models import Collection, MeasureRun
from ..services import questions
from ..services.measure import DEFAULT_MOST, MAX_MARKER_CHARS, MAX_QUESTIONS, parse_items, request_measure
from ..services.measure.estimate import MeasureEstimate, estimate_measure
from .common import HISTORY_ROWS, duration
from .known_answers import measure_lines

# Chart geometry, in SVG user units.
BAR_WIDTH, BAR_GAP, CHART_HEIGHT, LABEL_SPACE, LEFT = 22, 8, 140, 130, 80


def parse_lines(text: str) -> tuple[list[dict], list[str]]:
    """``question | answer marker`` lines and ``! question`` controls; raises ValidationError naming the
    line."""
    try:
        items = questions.parse_lines(text)
    except RagsiteError as exc:
        raise forms.ValidationError(exc.message) from None
    return parse_items(items)


class MeasureForm(forms.Form):
    collection = forms.ModelChoiceField(queryset=Collection.objects.select_related("agent"))
    questions = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 10, "cols": 100}),
        help_text="One per line: “question | answer marker” (the first | ends the question; the marker "
        "may hold more, a question writes its own | as \\|), or “! question” for a control the "
        "documents do not "
        f"answer. At most {MAX_QUESTIONS} lines; questions up to {MAX_QUESTION_CHARS} characters.",
    )
    most = forms.IntegerField(initial=DEFAULT_MOST, min_value=1, max_value=MAX_MOST)
    min_score = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Floor",
        help_text="Empty = unfloored: every returned paragraph carries its score.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["collection"].label_from_instance = lambda c: f"{c.agent.agent_id} / {c.name}"

    def clean_questions(self):
        questions, controls = parse_lines(self.cleaned_data["questions"])
        if not questions and not controls:
            raise forms.ValidationError("give at least one question")
        if len(questions) + len(controls) > MAX_QUESTIONS:
            raise forms.ValidationError(f"at most {MAX_QUESTIONS} questions and controls together")
        too_long = [
            q for q in [*(q["question"] for q in questions), *controls] if len(q) > MAX_QUESTION_CHARS
        ]
        if too_long or any(len(q["answer"]) > MAX_MARKER_CHARS for q in questions):
            raise forms.ValidationError(
                f"a question or marker is longer than {MAX_QUESTION_CHARS} characters"
            )
        return questions, controls


def chart(report: dict) -> dict:
    """Bars for an inline SVG: how many questions each variant found, one bar per variant."""
    total = max(1, report["questions"])
    bars = []
    for number, variant in enumerate(report["variants"]):
        height = round(CHART_HEIGHT * variant["found"] / total, 1)
        x = LEFT + number * (BAR_WIDTH + BAR_GAP)
        size = "auto" if variant["size"] is None else variant["size"]
        bars.append(
            {
                "x": x,
                "y": round(CHART_HEIGHT - height, 1),
                "height": height,
                "found": variant["found"],
                "label": f"{variant['method']} {size}, around {variant['around']}",
                "label_x": x + BAR_WIDTH / 2,
                "current": variant.get("current", False),
            }
        )
    return {
        "bars": bars,
        "bar_width": BAR_WIDTH,
        "height": CHART_HEIGHT,
        "total": report["questions"],
        "width": LEFT + len(bars) * (BAR_WIDTH + BAR_GAP) + 10,
        "full_height": CHART_HEIGHT + LABEL_SPACE,
        "label_y": CHART_HEIGHT + 10,
        "left": LEFT - 4,
    }


def estimate_sentence(estimate: MeasureEstimate) -> str:
    """What the form says before anything is queued: how much work, and how long by the last build."""
    said = (
        f"{estimate.variants} variants: the documents are cut {estimate.cuttings} ways and each cut is "
        "embedded "
        f"afresh, about {estimate.cuttings} full builds' worth of work"
    )
    if estimate.seconds is None:
        return (
            said + ". No build of this collection embedded enough paragraphs with this model to time it by."
        )
    return (
        said + f". Build {estimate.reference_build} embedded {estimate.reference_embedded} paragraphs in "
        f"{estimate.reference_seconds:g} s, so expect roughly {duration(estimate.seconds)} for its "
        f"{estimate.paragraphs} paragraphs. It runs in the background: this page can be left."
    )


def measure_payload(run: MeasureRun) -> dict:
    """What the measure page's bar shows, polled while the task runs, with the time left once it can
    be told."""
    detail = f"{run.variants_done} of {run.variants_total or '?'} variants measured"
    expected = (run.request or {}).get("estimate_seconds")
    if run.status == MeasureRun.QUEUED:
        detail = "queued: waiting for a task worker to pick it up"
    elif run.status == MeasureRun.RUNNING and run.started_at:
        spent = (timezone.now() - run.started_at).total_seconds()
        if run.variants_done and run.variants_total:
            left = spent * (run.variants_total - run.variants_done) / run.variants_done
            detail += f"; about {duration(max(1, int(left)))} left"
        elif expected:
            detail += f"; expected to take roughly {duration(expected)} in all"
    return {
        "measure": run.pk,
        "status": run.status,
        "active": run.status in (MeasureRun.QUEUED, MeasureRun.RUNNING),
        "percent": run.percent,
        "detail": detail,
        "error": run.error,
    }


def summary_rows(report: dict) -> list[dict]:
    """One line per variant, the measure page's table: what was built and how much it found."""
    rows = []
    for variant in report["variants"]:
        floor = variant.get("floor_range") or {}
        rows.append(
            {
                "variant": f"{variant['method']} "
                f"{variant['size'] if variant['size'] is not None else 'auto'}",
                "around": variant["around"],
                "paragraphs": variant["paragraphs"],
                "found": variant["found"],
                "current": variant.get("current", False),
                "lowest_answer": floor.get("lowest_answer"),
                "highest_control": floor.get("highest_control"),
                "separates": floor.get("separates"),
                "anchor": f"{variant['method']}-{variant['size'] if variant['size'] is not None else 'auto'}-"
                f"{variant['around']}",
            }
        )
    return rows


class MeasureAdminMixin:
    """Adds ``measure/`` (the form and the history), ``measure/<id>/`` (one run, polled while it runs)
    and its ``progress/`` to a Collection ModelAdmin."""

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("measure/", wrap(self.measure_view), name="collections_app_collection_measure"),
            path("measure/<int:measure_id>/", wrap(self.measure_run_view), name="collections_app_measurerun"),
            path(
                "measure/<int:measure_id>/progress/",
                wrap(self.measure_progress_view),
                name="collections_app_measurerun_progress",
            ),
            path(
                "measure/estimate/", wrap(self.measure_estimate_view), name="collections_app_measure_estimate"
            ),
        ] + super().get_urls()

    def measure_view(self, request):
        """Queue a measurement through `request_measure` and go to its page; the tens of variants
        run in a task."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        if request.method == "POST":
            form = MeasureForm(request.POST)
            if form.is_valid():
                data = form.cleaned_data
                questions, controls = data["questions"]
                try:
                    run = request_measure(
                        collection=data["collection"],
                        questions=questions,
                        controls=controls,
                        most=data["most"],
                        min_score=data["min_score"],
                        requested_by=request.user.get_username(),
                        estimate_seconds=estimate_measure(collection=data["collection"]).seconds,
                    )
                except RagsiteError as exc:
                    self.message_user(request, f"{exc.message} ({exc.code})", messages.ERROR)
                else:
                    return HttpResponseRedirect(reverse("admin:collections_app_measurerun", args=[run.pk]))
        else:
            initial = {"collection": request.GET.get("collection"), "most": DEFAULT_MOST}
            if request.GET.get("known"):  # start from the collection's stored known answers
                initial["questions"], left_out = measure_lines(request.GET.get("collection"))
                if left_out:
                    self.message_user(
                        request,
                        f"The first {MAX_QUESTIONS} known answers are filled in; measure takes "
                        f"at most {MAX_QUESTIONS}, so {left_out} were left out.",
                        messages.WARNING,
                    )
            form = MeasureForm(initial=initial)
        runs = MeasureRun.objects.select_related("collection__agent").defer("report", "request")
        chosen = request.GET.get("collection") or request.POST.get("collection")
        if chosen and str(chosen).isdigit():
            runs = runs.filter(collection_id=int(chosen))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Measure a collection",
            "form": form,
            "estimate_url": reverse("admin:collections_app_measure_estimate"),
            "runs": runs[:HISTORY_ROWS],
        }
        return TemplateResponse(request, "admin/collections_app/measure.html", context)

    def _measure_run(self, request, measure_id) -> MeasureRun:
        if not self.has_view_permission(request):
            raise PermissionDenied
        return get_object_or_404(MeasureRun.objects.select_related("collection__agent"), pk=measure_id)

    def measure_run_view(self, request, measure_id):
        """One measurement: its bar while the task runs, then the stored report with its chart."""
        run = self._measure_run(request, measure_id)
        report = run.report
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": f"Measure {run.pk} of {run.collection.name}",
            "run": run,
            "progress": measure_payload(run),
            "progress_url": reverse("admin:collections_app_measurerun_progress", args=[run.pk]),
            "report": report,
            "summary": summary_rows(report) if report else None,
            "chart": chart(report) if report else None,
            "runs": MeasureRun.objects.filter(collection=run.collection).defer("report", "request")[
                :HISTORY_ROWS
            ],
            "again_url": reverse("admin:collections_app_collection_measure")
            + f"?collection={run.collection_id}",
        }
        return TemplateResponse(request, "admin/collections_app/measure_run.html", context)

    def measure_estimate_view(self, request):
        """The form's warning for the collection picked: the work and the time it will take."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        chosen = request.GET.get("collection", "")
        collection = get_object_or_404(Collection, pk=int(chosen)) if chosen.isdigit() else None
        if collection is None:
            return JsonResponse({"estimate": None, "seconds": None})
        estimate = estimate_measure(collection=collection)
        return JsonResponse({"estimate": estimate_sentence(estimate), "seconds": estimate.seconds})

    def measure_progress_view(self, request, measure_id):
        return JsonResponse(measure_payload(self._measure_run(request, measure_id)))
