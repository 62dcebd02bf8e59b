"""The admin's known answers: a collection's own questions, edited as lines or uploaded as JSON Lines, and how
its builds did on them.

`KnownAnswersAdminMixin` adds the page ``<id>/known-answers/`` to `CollectionAdmin` and gives the
collection page its panel (templates/admin/collections_app/includes/known_answers.html): the latest
found@5, the floor in force and where it came from, a sparkline over the last builds, and warnings.
The views only parse forms, call `services.known_answers` and lay its reports out.
"""

from django import forms
from django.contrib import messages
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.http import urlencode

from ragsite.errors import RagsiteError

from ..models import Collection, KnownAnswersReport
from ..services import known_answers
from ..services.measure import MAX_QUESTIONS
from ..services.search import resolve_floor
from .common import require

# Sparkline geometry, in SVG user units.
# The found@5 chart: its size, and the margins its axes' labels sit in (SVG user units).
SPARK_WIDTH, SPARK_HEIGHT, SPARK_PAD = 360, 130, 6
CHART_LEFT, CHART_BOTTOM = 40, 28


class KnownAnswersForm(forms.Form):
    lines = forms.CharField(
        required=False,
        label="Known answers",
        widget=forms.Textarea(attrs={"rows": 14, "cols": 100, "spellcheck": "false"}),
        help_text="One per line: “question | answer marker” (text the answering paragraph holds; it may "
        "hold | itself, as a table row does: the first | ends the question, and a question writes its own "
        "| as \\|), or “! question” "
        f"for a control the documents do not answer. At most {known_answers.MAX_KNOWN_ANSWERS}. Empty "
        "clears the set.",
    )
    upload = forms.FileField(
        required=False,
        label="Or upload JSON Lines",
        help_text='Replaces the lines above: {"question": "…", "answer": "…"} '
        'or {"question": "…", "control": true} '
        "per line, as manage.py measure reads.",
    )

    def clean(self):
        data = super().clean()
        upload = data.get("upload")
        try:
            if upload is not None:
                if upload.size > known_answers.MAX_FILE_BYTES:
                    raise forms.ValidationError(
                        f"the file is larger than {known_answers.MAX_FILE_BYTES // 1024} KiB"
                    )
                items = known_answers.parse_jsonl(upload.read())
            else:
                items = known_answers.parse_lines(data.get("lines") or "")
            if items:
                known_answers.check_items(items)
        except RagsiteError as exc:
            raise forms.ValidationError(exc.message) from None
        data["items"] = items
        return data


def sparkline(reports: list[KnownAnswersReport]) -> dict | None:
    """A small chart for an inline SVG: found@5 as a share of the answers (the y axis, 0-100 %), one point
    per measured build, oldest first (the x axis, labelled with the builds' numbers)."""
    measured = [r for r in reports if r.found_at_5 is not None and r.answers]
    if not measured:
        return None
    left, right = CHART_LEFT, SPARK_WIDTH - SPARK_PAD
    top, bottom = SPARK_PAD, SPARK_HEIGHT - CHART_BOTTOM
    step = (right - left) / max(1, len(measured) - 1)
    points = []
    for number, report in enumerate(measured):
        share = report.found_at_5 / report.answers
        cached = KnownAnswersReport._meta.get_field("build").is_cached(report)
        build = report.build.number if cached and report.build is not None else None
        points.append(
            {
                "x": round(left + number * step if len(measured) > 1 else (left + right) / 2, 1),
                "y": round(top + (1 - share) * (bottom - top), 1),
                "label": f"#{build or report.build_id}",
                "title": f"build {build or report.build_id}: {report.found_at_5} of {report.answers} found",
            }
        )
    # Label at most about eight builds along the axis, always the first and the last.
    every = max(1, -(-len(points) // 8))
    labelled = [p for n, p in enumerate(points) if n % every == 0 or n == len(points) - 1]
    return {
        "points": points,
        "path": " ".join(f"{p['x']},{p['y']}" for p in points),
        "last": points[-1],
        "width": SPARK_WIDTH,
        "height": SPARK_HEIGHT,
        "left": left,
        "right": right,
        "top": top,
        "bottom": bottom,
        "middle": round((top + bottom) / 2, 1),
        "labelled": labelled,
        "label_y": SPARK_HEIGHT - CHART_BOTTOM + 14,
        "title_y": SPARK_HEIGHT - 2,
    }


def panel(collection: Collection) -> dict:
    """What the collection page shows of its known answers."""
    items = known_answers.known_answers(collection)
    history = known_answers.history(collection)
    latest = known_answers.latest_report(collection)
    floor, floor_source = resolve_floor(collection, None)
    return {
        "floor": floor,  # in force now, for a search that asks for none
        "floor_source": floor_source,
        "answers": sum(1 for q in items if not q.control),
        "controls": sum(1 for q in items if q.control),
        "floor_measured": collection.floor_measured,
        "live": history[-1] if history else None,
        # A refused candidate or a failed measurement is newer than the live build's report: say so too.
        "latest": latest if latest is not None and (not history or latest.pk != history[-1].pk) else None,
        "sparkline": sparkline(history),
        "edit_url": reverse("admin:collections_app_collection_known_answers", args=[collection.pk]),
        "measure_url": reverse("admin:collections_app_collection_measure")
        + "?"
        + urlencode({"collection": collection.pk, "known": 1}),
    }


class KnownAnswersAdminMixin:
    """Adds ``<id>/known-answers/`` (name ``collections_app_collection_known_answers``) and the page's
    panel."""

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path(
                "<path:object_id>/known-answers/",
                wrap(self.known_answers_view),
                name="collections_app_collection_known_answers",
            ),
        ] + super().get_urls()

    def change_view(self, request, object_id, form_url="", extra_context=None):
        collection = self.get_object(request, object_id)
        if collection is not None:
            extra_context = {**(extra_context or {}), "known_answers": panel(collection)}
        return super().change_view(request, object_id, form_url, extra_context)

    def known_answers_view(self, request, object_id):
        """Edit the set (lines or an upload) through `set_known_answers`; read the latest build's results."""
        collection = get_object_or_404(Collection.objects.select_related("agent"), pk=object_id)
        require(self.has_view_permission(request, collection))
        can_change = self.has_change_permission(request, collection)
        if request.method == "POST":
            require(can_change)
            form = KnownAnswersForm(request.POST, request.FILES)
            if form.is_valid():
                try:
                    checked = known_answers.set_known_answers(
                        collection=collection, items=form.cleaned_data["items"]
                    )
                except RagsiteError as exc:
                    self.message_user(request, f"{exc.message} ({exc.code})", messages.ERROR)
                else:
                    controls = sum(1 for q in checked if q.control)
                    measuring = (
                        " The live build is being measured against them."
                        if checked and hasattr(collection, "built")
                        else ""
                    )
                    self.message_user(
                        request,
                        f"Saved {len(checked) - controls} known answers and {controls} controls.{measuring}",
                        messages.SUCCESS,
                    )
                    return HttpResponseRedirect(
                        reverse("admin:collections_app_collection_change", args=[collection.pk])
                    )
        else:
            form = KnownAnswersForm(
                initial={"lines": known_answers.as_lines(known_answers.known_answers(collection))}
            )
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "original": collection,
            "title": f"Known answers of {collection.agent.agent_id} / {collection.name}",
            "form": form,
            "can_change": can_change,
            "known_answers": panel(collection),
            "report": known_answers.latest_report(collection),
        }
        return TemplateResponse(request, "admin/collections_app/known_answers.html", context)


def known_answers_warnings(run) -> list[str]:
    """A build's known-answer warnings (lost questions, the floor), for its row in the build history."""
    report = getattr(
        run, "known_answers_report", None
    )  # no report: a missing reverse one-to-one is an AttributeError
    return list(report.warnings) if report is not None else []


def measure_lines(collection_id: str | None) -> tuple[str, int]:
    """The measure page's start from a stored set: its lines (at most measure's limit) and how many
    were left out."""
    collection = (
        Collection.objects.filter(pk=collection_id).first() if (collection_id or "").isdigit() else None
    )
    if collection is None:
        return "", 0
    items = known_answers.known_answers(collection)
    return known_answers.as_lines(items[:MAX_QUESTIONS]), max(0, len(items) - MAX_QUESTIONS)
