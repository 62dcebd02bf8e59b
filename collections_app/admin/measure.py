"""The admin's measure page: paste questions, run `measure_collection`, read a table per variant and a chart.

`MeasureAdminMixin` adds the page to `CollectionAdmin` (one base class there); the view only parses
the form, calls the service, and lays the report out for the template.
"""

from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse
from django.urls import path

from ragsite.errors import RagsiteError

from ..models import Collection
from ..services import questions
from ..services.measure import DEFAULT_MOST, MAX_MARKER_CHARS, MAX_QUESTIONS, measure_collection, parse_items
from ..services.search import MAX_MOST, MAX_QUESTION_CHARS
from .known_answers import measure_lines

# Chart geometry, in SVG user units.
BAR_WIDTH, BAR_GAP, CHART_HEIGHT, LABEL_SPACE, LEFT = 22, 8, 140, 90, 30


def parse_lines(text: str) -> tuple[list[dict], list[str]]:
    """``question | answer marker`` lines and ``! question`` controls; raises ValidationError naming the line."""
    try:
        items = questions.parse_lines(text)
    except RagsiteError as exc:
        raise forms.ValidationError(exc.message) from None
    return parse_items(items)


class MeasureForm(forms.Form):
    collection = forms.ModelChoiceField(queryset=Collection.objects.select_related("agent"))
    questions = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 10, "cols": 100}),
        help_text=f"One per line: “question | answer marker”, or “! question” for a control the documents do not "
        f"answer. At most {MAX_QUESTIONS} lines; questions up to {MAX_QUESTION_CHARS} characters.",
    )
    most = forms.IntegerField(initial=DEFAULT_MOST, min_value=1, max_value=MAX_MOST)
    min_score = forms.FloatField(required=False, min_value=0, max_value=1, label="Floor",
                                 help_text="Empty = unfloored: every returned paragraph carries its score.")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["collection"].label_from_instance = lambda c: f"{c.agent.agent_id} / {c.name}"

    def clean_questions(self):
        questions, controls = parse_lines(self.cleaned_data["questions"])
        if not questions and not controls:
            raise forms.ValidationError("give at least one question")
        if len(questions) + len(controls) > MAX_QUESTIONS:
            raise forms.ValidationError(f"at most {MAX_QUESTIONS} questions and controls together")
        too_long = [q for q in [*(q["question"] for q in questions), *controls] if len(q) > MAX_QUESTION_CHARS]
        if too_long or any(len(q["answer"]) > MAX_MARKER_CHARS for q in questions):
            raise forms.ValidationError(f"a question or marker is longer than {MAX_QUESTION_CHARS} characters")
        return questions, controls


def chart(report: dict) -> dict:
    """Bars for an inline SVG: how many questions each variant found, one bar per variant."""
    total = max(1, report["questions"])
    bars = []
    for number, variant in enumerate(report["variants"]):
        height = round(CHART_HEIGHT * variant["found"] / total, 1)
        x = LEFT + number * (BAR_WIDTH + BAR_GAP)
        size = "auto" if variant["size"] is None else variant["size"]
        bars.append({
            "x": x, "y": round(CHART_HEIGHT - height, 1), "height": height, "found": variant["found"],
            "label": f"{variant['method']} {size} a{variant['around']}", "label_x": x + BAR_WIDTH / 2,
            "current": variant.get("current", False),
        })
    return {
        "bars": bars, "bar_width": BAR_WIDTH, "height": CHART_HEIGHT, "total": report["questions"],
        "width": LEFT + len(bars) * (BAR_WIDTH + BAR_GAP) + 10, "full_height": CHART_HEIGHT + LABEL_SPACE,
        "label_y": CHART_HEIGHT + 10,
    }


class MeasureAdminMixin:
    """Adds ``measure/`` (name ``collections_app_collection_measure``) to a Collection ModelAdmin."""

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("measure/", wrap(self.measure_view), name="collections_app_collection_measure"),
        ] + super().get_urls()

    def measure_view(self, request):
        """Measure a collection's variants through `measure_collection`; nothing is written to it."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        report = None
        if request.method == "POST":
            form = MeasureForm(request.POST)
            if form.is_valid():
                data = form.cleaned_data
                questions, controls = data["questions"]
                try:
                    report = measure_collection(collection=data["collection"], questions=questions,
                                                controls=controls, most=data["most"], min_score=data["min_score"])
                except RagsiteError as exc:
                    self.message_user(request, f"{exc.message} ({exc.code})", messages.ERROR)
        else:
            initial = {"collection": request.GET.get("collection"), "most": DEFAULT_MOST}
            if request.GET.get("known"):  # start from the collection's stored known answers
                initial["questions"], left_out = measure_lines(request.GET.get("collection"))
                if left_out:
                    self.message_user(request, f"The first {MAX_QUESTIONS} known answers are filled in; measure takes "
                                      f"at most {MAX_QUESTIONS}, so {left_out} were left out.", messages.WARNING)
            form = MeasureForm(initial=initial)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Measure a collection",
            "form": form,
            "report": report,
            "chart": chart(report) if report else None,
        }
        return TemplateResponse(request, "admin/collections_app/measure.html", context)
