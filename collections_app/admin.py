"""The Django admin for people: staff only, CSRF on, every action a thin adapter over a service.

What people do here: start rebuilds and watch them, review and upload documents,
label paragraphs, manage readers and labels, issue and revoke keys, read spend,
and try searches in the playground. The pages never show a filesystem path: a
collection's folder is named by its variable, an upload by its file name.
"""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.db.models import Count, JSONField, OuterRef, Q, Subquery
from django.http import Http404, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from ragsite.errors import Conflict, RagsiteError

from . import conf
from .admin_measure import MeasureAdminMixin
from .chunking import AVAILABLE
from .extract import SUPPORTED_SUFFIXES
from .models import (
    Agent,
    ApiKey,
    BuildRun,
    Collection,
    CollectionBuilt,
    Document,
    Label,
    ModelCall,
    Paragraph,
    Reader,
    StoreMeta,
)
from .services.agents import issue_key, revoke_key
from .services.builds import ACTIVE_STATES, request_build
from .services.labels import (
    add_labels,
    labels_named,
    remove_labels,
    set_default_labels,
    set_paragraph_labels,
)
from .services.ledger import spend_by_day, spent_today
from .services.review import approve_documents
from .services.search import MAX_AROUND, MAX_MOST, MAX_QUESTION_CHARS, search_collection
from .services.uploads import upload_document

HISTORY_ROWS = 20


# --- Small shared pieces -------------------------------------------------------


def refused_display(refused) -> str:
    """The three answers of `refused`, never collapsed: not recorded, nothing, or names."""
    if refused is None:
        return "not recorded"
    if not refused:
        return "nothing refused"
    return ", ".join(refused)


def refused_html(refused):
    """`refused_display`, each state styled differently so that none can be mistaken for another."""
    if refused is None:
        return format_html('<span class="rs-refused-none" title="no build recorded what it could not read">{}</span>',
                           "not recorded")
    if not refused:
        return format_html('<span class="rs-refused-empty">{}</span>', "nothing refused")
    return format_html('<span class="rs-refused-names">{}</span>', ", ".join(refused))


def status_badge(status: str):
    return format_html('<span class="rs-badge rs-status-{}">{}</span>', status.replace(" ", "-"), status)


def text_block(text: str, extra_class: str = ""):
    return format_html('<div class="rs-text {}">{}</div>', extra_class, text)


def _require(allowed: bool) -> None:
    if not allowed:
        raise PermissionDenied


def _has_perm(request, action: str, model) -> bool:
    opts = model._meta
    return request.user.has_perm(f"{opts.app_label}.{get_permission_codename(action, opts)}")


def progress_payload(run: BuildRun | None) -> dict:
    """What the progress bar shows for one build: status, percent and the counts behind it."""
    if run is None:
        return {"build": None, "status": "never built", "active": False, "percent": 0, "detail": "no build yet"}
    detail = f"{run.documents_done} of {run.documents_total} documents read"
    if run.paragraphs_total:
        detail += f", {run.paragraphs_done} of {run.paragraphs_total} paragraphs embedded"
    if run.status == BuildRun.SUCCEEDED:
        detail += f"; {run.passages} paragraphs"
    return {
        "build": run.pk,
        "status": run.status,
        "active": run.status in ACTIVE_STATES,
        "percent": run.percent,
        "documents_done": run.documents_done,
        "documents_total": run.documents_total,
        "paragraphs_done": run.paragraphs_done,
        "paragraphs_total": run.paragraphs_total,
        "passages": run.passages,
        "detail": detail,
        "error": run.error,
        "warnings": list(run.problems) + list(run.warnings),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def request_build_or_say_why(modeladmin, request, collection) -> BuildRun | None:
    """Queue one build through the service; a build already running is a message, not an error page."""
    try:
        return request_build(collection=collection, requested_by=f"admin:{request.user.get_username()}")
    except Conflict as exc:
        modeladmin.message_user(request, f"Not started: {exc.message}. Wait for it to finish.", messages.WARNING)
    except RagsiteError as exc:
        modeladmin.message_user(request, f"Not started: {exc.message}", messages.ERROR)
    return None


# --- Store facts ------------------------------------------------------------------


@admin.register(StoreMeta)
class StoreMetaAdmin(admin.ModelAdmin):
    list_display = ["key", "value"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


# --- Agents and keys ---------------------------------------------------------------


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    fields = ["prefix", "name", "may_act_for_others", "created_at", "last_used_at", "state"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "state"]
    extra = 0
    can_delete = False
    ordering = ["-created_at"]

    def has_add_permission(self, request, obj=None):
        return False  # keys are issued by a button, so the raw key can be shown once

    @admin.display(description="state")
    def state(self, key):
        if key.revoked_at is not None:
            return format_html('<span class="rs-badge rs-status-refused">revoked {}</span>',
                               key.revoked_at.strftime("%Y-%m-%d %H:%M"))
        url = reverse("admin:collections_app_apikey_revoke", args=[key.pk])
        return format_html('<span class="rs-badge rs-status-succeeded">active</span> <a href="{}">revoke…</a>', url)


def spend_chart(days) -> str:
    """An inline SVG bar chart of cost per day (calls when nothing had a price)."""
    by_cost = any(d.cost for d in days)
    values = [float(d.cost) if by_cost else d.calls for d in days]
    top = max(values) or 1
    width, height, gap = 600, 120, 2
    bar = (width - gap * (len(days) - 1)) / len(days)
    bars = []
    for i, (day, value) in enumerate(zip(days, values, strict=True)):
        h = 0 if not value else max(2.0, (height - 30) * value / top)
        x = i * (bar + gap)
        label = f"{day.day:%Y-%m-%d}: {day.calls} calls, cost {day.cost:.4f}"
        # format_html escapes its arguments into strings first, so numbers are formatted here.
        bars.append(format_html(
            '<rect class="rs-spend-bar" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
            f"{x:.1f}", f"{height - 14 - h:.1f}", f"{bar:.1f}", f"{h:.1f}", label,
        ))
    axis = format_html(
        '<text x="0" y="{}" class="rs-chart-axis">{}</text>'
        '<text x="{}" y="{}" text-anchor="end" class="rs-chart-axis">{}</text>'
        '<text x="0" y="10" class="rs-chart-axis">max {}</text>',
        height - 2, f"{days[0].day:%d %b}", width, height - 2, f"{days[-1].day:%d %b}",
        f"{top:.4f}" if by_cost else f"{int(top)} calls",
    )
    return format_html(
        '<svg class="rs-spend-chart" role="img" aria-label="{}" viewBox="0 0 {} {}" width="{}" height="{}">{}{}</svg>',
        "cost per day" if by_cost else "model calls per day", width, height, width, height,
        format_html_join("", "{}", ((b,) for b in bars)), axis,
    )


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["agent_id", "name", "daily_budget", "spent_today_shown", "runaway_limit", "active_keys", "created_at"]
    search_fields = ["agent_id", "name"]
    fields = ["agent_id", "name", "daily_budget", "runaway_limit", "created_at", "spend"]
    readonly_fields = ["created_at", "spend"]
    inlines = [ApiKeyInline]
    actions = ["issue_new_key"]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            active_key_count=Count("keys", filter=Q(keys__revoked_at__isnull=True), distinct=True)
        )

    def get_readonly_fields(self, request, obj=None):
        return ["agent_id", "created_at", "spend"] if obj is not None else ["created_at", "spend"]

    @admin.display(description="active keys", ordering="active_key_count")
    def active_keys(self, agent):
        return agent.active_key_count

    @admin.display(description="spent today")
    def spent_today_shown(self, agent):
        spent = spent_today(agent)
        if agent.daily_budget is not None and spent >= float(agent.daily_budget):
            return format_html('<span class="rs-refused-names">{} (over budget)</span>', f"{spent:.4f}")
        return f"{spent:.4f}"

    @admin.display(description="spend, last 30 days")
    def spend(self, agent):
        if agent.pk is None:
            return "—"
        days = spend_by_day(agent, days=30)
        used = [d for d in days if d.calls]
        total_cost = sum(d.cost for d in days)
        rows = format_html_join(
            "", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            ((f"{d.day:%Y-%m-%d}", d.calls, d.tokens_in, d.tokens_out, f"{d.cost:.4f}") for d in reversed(used)),
        )
        table = format_html(
            '<table class="rs-spend-table"><thead><tr><th>day</th><th>calls</th><th>tokens in</th>'
            "<th>tokens out</th><th>cost</th></tr></thead><tbody>{}</tbody>"
            "<tfoot><tr><th>30 days</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></tfoot></table>",
            rows or mark_safe('<tr><td colspan="5" class="rs-refused-none">no model calls</td></tr>'),
            sum(d.calls for d in days), sum(d.tokens_in for d in days), sum(d.tokens_out for d in days),
            f"{total_cost:.4f}",
        )
        return format_html('<div class="rs-spend">{}{}</div>', spend_chart(days), table)

    def get_urls(self):
        return [
            path("<path:object_id>/issue-key/", self.admin_site.admin_view(self.issue_key_view),
                 name="collections_app_agent_issue_key"),
        ] + super().get_urls()

    def _show_keys(self, request, issued):
        """The one page a raw key is ever shown on: rendered in the response, stored nowhere."""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "New API key" if len(issued) == 1 else "New API keys",
            "issued": issued,
        }
        return TemplateResponse(request, "admin/collections_app/agent/key_issued.html", context)

    @admin.action(description="Issue a new API key (shown once)", permissions=["change"])
    def issue_new_key(self, request, queryset):
        issued = [(agent, issue_key(agent=agent, name="issued in admin")) for agent in queryset]
        return self._show_keys(request, [(agent, key, raw) for agent, (key, raw) in issued])

    def issue_key_view(self, request, object_id):
        if request.method != "POST":
            return HttpResponseRedirect(reverse("admin:collections_app_agent_change", args=[object_id]))
        agent = get_object_or_404(Agent, pk=object_id)
        _require(self.has_change_permission(request, agent))
        name = (request.POST.get("name") or "issued in admin").strip()[:100]
        key, raw = issue_key(agent=agent, name=name)
        return self._show_keys(request, [(agent, key, raw)])


class KeyStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "agent", "name", "may_act_for_others", "created_at", "last_used_at", "revoked_at"]
    list_filter = [KeyStateFilter, "agent"]
    fields = ["agent", "prefix", "name", "may_act_for_others", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["agent", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke(self, request, queryset):
        keys = list(queryset.filter(revoked_at__isnull=True))
        for key in keys:
            revoke_key(key=key)
        self.message_user(request, f"Revoked {len(keys)} key(s).", messages.SUCCESS)

    def get_urls(self):
        return [
            path("<path:object_id>/revoke/", self.admin_site.admin_view(self.revoke_view),
                 name="collections_app_apikey_revoke"),
        ] + super().get_urls()

    def revoke_view(self, request, object_id):
        key = get_object_or_404(ApiKey.objects.select_related("agent"), pk=object_id)
        _require(self.has_change_permission(request, key))
        back = reverse("admin:collections_app_agent_change", args=[key.agent_id])
        if request.method == "POST":
            revoke_key(key=key)
            self.message_user(request, f"Key {key.prefix}… of {key.agent.agent_id} is revoked.", messages.SUCCESS)
            return HttpResponseRedirect(back)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Revoke an API key",
            "key": key,
            "back": back,
        }
        return TemplateResponse(request, "admin/collections_app/apikey/revoke.html", context)


# --- Labels and readers ------------------------------------------------------------


class ReaderInline(admin.TabularInline):
    model = Reader.labels.through
    verbose_name = "reader holding this label"
    verbose_name_plural = "readers holding this label"
    extra = 0
    autocomplete_fields = ["reader"]


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ["name", "description", "paragraph_count", "reader_count", "document_count"]
    search_fields = ["name", "description"]
    inlines = [ReaderInline]

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            n_paragraphs=Count("paragraphs", distinct=True),
            n_readers=Count("readers", distinct=True),
            n_documents=Count("documents", distinct=True),
        )

    @admin.display(description="paragraphs", ordering="n_paragraphs")
    def paragraph_count(self, label):
        url = reverse("admin:collections_app_paragraph_changelist") + "?" + urlencode({"labels__id__exact": label.pk})
        return format_html('<a href="{}">{}</a>', url, label.n_paragraphs)

    @admin.display(description="readers", ordering="n_readers")
    def reader_count(self, label):
        url = reverse("admin:collections_app_reader_changelist") + "?" + urlencode({"labels__id__exact": label.pk})
        return format_html('<a href="{}">{}</a>', url, label.n_readers)

    @admin.display(description="documents (default)", ordering="n_documents")
    def document_count(self, label):
        return label.n_documents


@admin.register(Reader)
class ReaderAdmin(admin.ModelAdmin):
    list_display = ["external_id", "labels_shown"]
    list_filter = ["labels"]
    search_fields = ["external_id"]
    filter_horizontal = ["labels"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("labels")

    @admin.display(description="labels")
    def labels_shown(self, reader):
        return ", ".join(label.name for label in reader.labels.all()) or "—"


# --- Collections -------------------------------------------------------------------


class CollectionForm(forms.ModelForm):
    # Only the strategies that exist are offered; a planned one is not a choice.
    method = forms.ChoiceField(choices=[(name, name) for name in AVAILABLE])

    class Meta:
        model = Collection
        fields = ["agent", "name", "built_from", "method", "size", "overlap", "per_reader", "judge", "min_score",
                  "around"]


class PlaygroundForm(forms.Form):
    collection = forms.ModelChoiceField(
        queryset=Collection.objects.select_related("agent"), help_text="The search runs as the agent owning it."
    )
    question = forms.CharField(max_length=MAX_QUESTION_CHARS, widget=forms.Textarea(attrs={"rows": 3, "cols": 80}))
    reader = forms.ModelChoiceField(
        queryset=Reader.objects.all(), required=False, to_field_name="external_id",
        help_text="Required for a per-reader collection.",
    )
    on_behalf_of = forms.ModelChoiceField(
        queryset=Agent.objects.all(), required=False, to_field_name="agent_id", label="On behalf of",
        help_text="The agent charged for model calls; empty = nobody is charged and nothing is recorded.",
    )
    min_score = forms.FloatField(required=False, min_value=0, max_value=1, label="Floor",
                                 help_text="Empty = the collection's or MIN_SCORE.")
    around = forms.IntegerField(required=False, min_value=0, max_value=MAX_AROUND,
                                help_text="Empty = the collection's or AROUND.")
    most = forms.IntegerField(initial=5, min_value=1, max_value=MAX_MOST)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["collection"].label_from_instance = lambda c: f"{c.agent.agent_id} / {c.name}"


@admin.register(Collection)
class CollectionAdmin(MeasureAdminMixin, admin.ModelAdmin):
    form = CollectionForm
    list_display = ["name", "agent", "method", "last_build", "paragraphs", "embedding_model", "refused",
                    "warnings"]
    list_filter = ["agent", "method", "per_reader"]
    search_fields = ["name", "built_from"]
    list_select_related = ["agent", "built"]
    actions = ["rebuild_selected"]
    readonly_fields = ["source", "contents", "current_build", "build_history"]
    fieldsets = [
        (None, {"fields": ["agent", "name", "built_from", "source", "contents"]}),
        ("Chunking", {"fields": ["method", "size", "overlap"]}),
        ("Search", {"fields": ["per_reader", "judge", "min_score", "around"]}),
        ("Builds", {"fields": ["current_build", "build_history"]}),
    ]

    def get_queryset(self, request):
        latest = BuildRun.objects.filter(collection=OuterRef("pk")).order_by("-created_at", "-id")
        return super().get_queryset(request).annotate(
            last_run_id=Subquery(latest.values("pk")[:1]),
            last_status=Subquery(latest.values("status")[:1]),
            last_warnings=Subquery(latest.values("warnings")[:1], output_field=JSONField()),
            last_problems=Subquery(latest.values("problems")[:1], output_field=JSONField()),
            last_error=Subquery(latest.values("error")[:1]),
        )

    def get_readonly_fields(self, request, obj=None):
        # A collection's name is its folder variable's name and its agent's handle: fixed once made.
        fixed = ["agent", "name"] if obj is not None else []
        return fixed + list(self.readonly_fields)

    # -- changelist columns

    @staticmethod
    def _built(collection):
        try:
            return collection.built
        except CollectionBuilt.DoesNotExist:
            return None

    @admin.display(description="last build", ordering="last_status")
    def last_build(self, collection):
        status = getattr(collection, "last_status", None)
        if status is None:
            return format_html('<span class="rs-refused-none">{}</span>', "never built")
        url = reverse("admin:collections_app_buildrun_change", args=[collection.last_run_id])
        return format_html('<a href="{}">{}</a>', url, status_badge(status))

    @admin.display(description="paragraphs", ordering="built__passages")
    def paragraphs(self, collection):
        built = self._built(collection)
        return "—" if built is None else built.passages

    @admin.display(description="model", ordering="built__model")
    def embedding_model(self, collection):
        built = self._built(collection)
        return "—" if built is None else f"{built.model} ({built.dimensions})"

    @admin.display(description="refused")
    def refused(self, collection):
        built = self._built(collection)
        if built is None:
            return format_html('<span class="rs-refused-none">{}</span>', "never built")
        return refused_html(built.refused)

    @admin.display(description="warnings")
    def warnings(self, collection):
        items = list(getattr(collection, "last_problems", None) or []) + list(
            getattr(collection, "last_warnings", None) or []
        )
        error = getattr(collection, "last_error", None)
        if error:
            items.insert(0, error)
        if not items:
            return "—"
        return format_html('<ul class="rs-warnings">{}</ul>', format_html_join("", "<li>{}</li>", ((w,) for w in items)))

    # -- change page

    @admin.display(description="source")
    def source(self, collection):
        if collection.pk is None:
            return "—"
        variable = conf.folder_variable(collection.name)
        folder = "a folder, from " + variable if conf.knowledge_folder(collection.name) else f"no folder ({variable} is not set)"
        uploads = collection.documents.filter(source=Document.UPLOAD).count()
        upload_url = reverse("admin:collections_app_document_upload") + "?" + urlencode({"collection": collection.pk})
        return format_html('{} and {} uploaded document(s) — <a href="{}">upload documents…</a>', folder, uploads, upload_url)

    @admin.display(description="contents")
    def contents(self, collection):
        if collection.pk is None:
            return "—"
        counts = collection.documents.aggregate(
            total=Count("id"),
            review=Count("id", filter=Q(status=Document.NEEDS_REVIEW)),
            refused=Count("id", filter=Q(status=Document.REFUSED)),
        )
        documents = reverse("admin:collections_app_document_changelist") + "?" + urlencode({"collection__id__exact": collection.pk})
        review = documents + "&" + urlencode({"status__exact": Document.NEEDS_REVIEW})
        paragraphs = reverse("admin:collections_app_paragraph_changelist") + "?" + urlencode({"collection__id__exact": collection.pk})
        return format_html(
            '<a href="{}">{} documents</a> (<a href="{}">{} need review</a>, {} refused) · <a href="{}">{} paragraphs</a>',
            documents, counts["total"], review, counts["review"], counts["refused"],
            paragraphs, collection.paragraphs.count(),
        )

    @admin.display(description="current build")
    def current_build(self, collection):
        built = self._built(collection) if collection.pk else None
        if built is None:
            return format_html('<span class="rs-refused-none">{}</span>', "never built")
        return format_html(
            "{} paragraphs · {} ({} dimensions) · {} · built {} · refused: {}",
            built.passages, built.model, built.dimensions, built.method, built.built_at.strftime("%Y-%m-%d %H:%M"),
            refused_html(built.refused),
        )

    @admin.display(description="build history")
    def build_history(self, collection):
        if collection.pk is None:
            return "—"
        runs = list(collection.runs.all()[:HISTORY_ROWS])
        if not runs:
            return format_html('<span class="rs-refused-none">{}</span>', "no builds yet")
        rows = format_html_join(
            "",
            '<tr><td><a href="{}">{}</a></td><td>{}</td><td>{} %</td><td>{}</td><td>{}</td><td>{}</td>'
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    reverse("admin:collections_app_buildrun_change", args=[run.pk]), run.pk, status_badge(run.status),
                    run.percent, run.passages, f"{run.documents_read}/{run.documents_reused}/{run.documents_refused}",
                    run.paragraphs_embedded, run.model or "—",
                    refused_html(run.refused) if run.status == BuildRun.SUCCEEDED else "—",
                    "; ".join([*run.problems, *run.warnings, *([run.error] if run.error else [])]) or "—",
                    run.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                )
                for run in runs
            ),
        )
        more = reverse("admin:collections_app_buildrun_changelist") + "?" + urlencode({"collection__id__exact": collection.pk})
        return format_html(
            '<table class="rs-history"><thead><tr><th>build</th><th>status</th><th>progress</th><th>paragraphs</th>'
            '<th title="read / reused / refused">documents r/r/r</th><th>embedded</th><th>model</th><th>refused</th>'
            "<th>warnings</th><th>requested</th></tr></thead><tbody>{}</tbody></table>"
            '<p><a href="{}">all builds of this collection</a></p>',
            rows, more,
        )

    def change_view(self, request, object_id, form_url="", extra_context=None):
        extra_context = dict(extra_context or {})
        collection = self.get_object(request, object_id)
        if collection is not None:
            run = collection.runs.first()
            extra_context.update(
                progress=progress_payload(run),
                progress_url=reverse("admin:collections_app_collection_progress", args=[collection.pk]),
                rebuild_url=reverse("admin:collections_app_collection_rebuild", args=[collection.pk]),
                playground_url=reverse("admin:collections_app_collection_playground")
                + "?" + urlencode({"collection": collection.pk}),
                can_rebuild=self.has_change_permission(request, collection),
            )
        return super().change_view(request, object_id, form_url, extra_context)

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}), "playground_url": reverse("admin:collections_app_collection_playground")}
        return super().changelist_view(request, extra_context)

    # -- rebuilds

    @admin.action(description="Rebuild selected collections", permissions=["change"])
    def rebuild_selected(self, request, queryset):
        started = [c.name for c in queryset if request_build_or_say_why(self, request, c) is not None]
        if started:
            self.message_user(request, f"Build requested for {', '.join(started)}.", messages.SUCCESS)

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("playground/", wrap(self.playground_view), name="collections_app_collection_playground"),
            path("<path:object_id>/rebuild/", wrap(require_POST(self.rebuild_view)),
                 name="collections_app_collection_rebuild"),
            path("<path:object_id>/progress/", wrap(self.progress_view), name="collections_app_collection_progress"),
        ] + super().get_urls()

    def rebuild_view(self, request, object_id):
        collection = get_object_or_404(Collection, pk=object_id)
        _require(self.has_change_permission(request, collection))
        run = request_build_or_say_why(self, request, collection)
        if run is not None:
            run.refresh_from_db()
            self.message_user(request, f"Build {run.pk} of {collection.name} requested ({run.status}).", messages.SUCCESS)
        return HttpResponseRedirect(reverse("admin:collections_app_collection_change", args=[collection.pk]))

    def progress_view(self, request, object_id):
        """The progress bar's data: the latest build of the collection (or `?build=<id>`), as JSON."""
        collection = get_object_or_404(Collection, pk=object_id)
        _require(self.has_view_permission(request, collection))
        runs = collection.runs.all()
        build = request.GET.get("build")
        if build:
            if not build.isdigit():
                raise Http404
            run = get_object_or_404(runs, pk=int(build))
        else:
            run = runs.first()
        return JsonResponse(progress_payload(run))  # admin_view marks it never-cache

    # -- playground

    def playground_view(self, request):
        """Run a search exactly as the API would, through `search_collection`, and show everything it answers."""
        _require(self.has_view_permission(request))
        answer = None
        if request.method == "POST":
            form = PlaygroundForm(request.POST)
            if form.is_valid():
                data = form.cleaned_data
                collection = data["collection"]
                try:
                    answer = search_collection(
                        agent=collection.agent,
                        collection=collection,
                        question=data["question"],
                        reader=data["reader"].external_id if data["reader"] else None,
                        on_behalf_of=data["on_behalf_of"].agent_id if data["on_behalf_of"] else None,
                        most=data["most"] or 5,
                        around=data["around"],
                        min_score=data["min_score"],
                    )
                except RagsiteError as exc:
                    self.message_user(request, f"{exc.message} ({exc.code})", messages.ERROR)
                else:
                    answer["searched_as"] = collection.agent.agent_id
                    for paragraph in answer["paragraphs"]:
                        paragraph["percent"] = round(100 * paragraph["score"], 1)
                    answer["floor_percent"] = round(100 * answer["floor"], 1)
        else:
            form = PlaygroundForm(initial={"collection": request.GET.get("collection"), "most": 5})
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Search playground",
            "form": form,
            "answer": answer,
        }
        return TemplateResponse(request, "admin/collections_app/playground.html", context)


# --- Documents ---------------------------------------------------------------------


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(d, initial) for d in data]
        return [single(data, initial)]


class UploadForm(forms.Form):
    collection = forms.ModelChoiceField(queryset=Collection.objects.select_related("agent"))
    files = MultipleFileField(help_text="PDF, Word, Markdown, text or HTML; read by the collection's next build.")
    rebuild = forms.BooleanField(required=False, label="Rebuild the collection afterwards")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["collection"].label_from_instance = lambda c: f"{c.agent.agent_id} / {c.name}"


class DocumentDefaultLabelsForm(forms.ModelForm):
    class Meta:
        model = Document
        fields = ["default_labels"]
        help_texts = {
            "default_labels": "Labels every paragraph of this document carries: a label added here is given to its "
            "paragraphs now, and one removed here is taken off them."
        }


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    form = DocumentDefaultLabelsForm
    list_display = ["name", "collection", "source", "status_shown", "paragraphs", "warnings_shown",
                    "conflicts_shown", "default_labels_shown"]
    list_filter = ["status", "collection", "source"]
    search_fields = ["name"]
    list_select_related = ["collection__agent"]
    actions = ["approve"]
    # `upload` is never a field here: its value is a storage path.
    fields = ["collection", "name", "source", "status_shown", "fingerprint", "approved_fingerprint",
              "paragraphs_link", "summary", "warnings_shown", "conflicts_shown", "default_labels", "updated_at"]
    readonly_fields = ["collection", "name", "source", "status_shown", "fingerprint", "approved_fingerprint",
                       "paragraphs_link", "summary", "warnings_shown", "conflicts_shown", "updated_at"]
    filter_horizontal = ["default_labels"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("default_labels")

    def has_add_permission(self, request):
        return False  # documents come from a folder or from the upload page

    @admin.display(description="status", ordering="status")
    def status_shown(self, document):
        return status_badge(document.get_status_display())

    @admin.display(description="paragraphs", ordering="paragraph_count")
    def paragraphs(self, document):
        return document.paragraph_count if document.fingerprint else "—"

    @admin.display(description="warnings")
    def warnings_shown(self, document):
        if not document.scan_warnings:
            return "—"
        return format_html('<ul class="rs-warnings">{}</ul>',
                           format_html_join("", "<li>{}</li>", ((w,) for w in document.scan_warnings)))

    @admin.display(description="conflicts")
    def conflicts_shown(self, document):
        if not document.conflicts:
            return "—"
        return format_html('<ul class="rs-warnings">{}</ul>',
                           format_html_join("", "<li>{}</li>", ((c,) for c in document.conflicts)))

    @admin.display(description="default labels")
    def default_labels_shown(self, document):
        return ", ".join(label.name for label in document.default_labels.all()) or "—"

    @admin.display(description="paragraphs")
    def paragraphs_link(self, document):
        url = reverse("admin:collections_app_paragraph_changelist") + "?" + urlencode({"document": document.pk})
        if not document.fingerprint:
            return "not built yet: the next build reads it"
        return format_html('<a href="{}">{} paragraphs</a>', url, document.paragraph_count)

    def save_related(self, request, form, formsets, change):
        # Default labels go through the service, which also applies them to the paragraphs.
        labels = form.cleaned_data.pop("default_labels", None)
        super().save_related(request, form, formsets, change)
        if labels is not None:
            added, removed = set_default_labels(document=form.instance, labels=labels)
            if added or removed:
                self.message_user(request, f"Paragraph labels: {added} added, {removed} removed.", messages.INFO)

    @admin.action(description="Approve selected documents (needs review → active)", permissions=["change"])
    def approve(self, request, queryset):
        approved = approve_documents(queryset, by=request.user)
        skipped = queryset.count() - len(approved)
        text = f"Approved {len(approved)} document(s): {', '.join(d.name for d in approved)}." if approved else \
            "No document was approved."
        if skipped:
            text += f" {skipped} were not waiting for review and were left alone."
        self.message_user(request, text, messages.SUCCESS if approved else messages.WARNING)

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("upload/", wrap(self.upload_view), name="collections_app_document_upload"),
            path("<path:object_id>/approve/", wrap(require_POST(self.approve_view)),
                 name="collections_app_document_approve"),
        ] + super().get_urls()

    def approve_view(self, request, object_id):
        document = get_object_or_404(Document, pk=object_id)
        _require(self.has_change_permission(request, document))
        if approve_documents([document], by=request.user):
            self.message_user(request, f"{document.name} is approved and searched from now on.", messages.SUCCESS)
        else:
            self.message_user(request, f"{document.name} was not waiting for review.", messages.WARNING)
        return HttpResponseRedirect(reverse("admin:collections_app_document_change", args=[document.pk]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        document = self.get_object(request, object_id)
        extra_context = dict(extra_context or {})
        if document is not None and document.status == Document.NEEDS_REVIEW:
            extra_context["approve_url"] = reverse("admin:collections_app_document_approve", args=[document.pk])
        return super().change_view(request, object_id, form_url, extra_context)

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}), "upload_url": reverse("admin:collections_app_document_upload")}
        return super().changelist_view(request, extra_context)

    def upload_view(self, request):
        """Upload files into a collection through `upload_document`; each file is accepted or refused on its own."""
        _require(_has_perm(request, "add", Document))
        if request.method == "POST":
            form = UploadForm(request.POST, request.FILES)
            if form.is_valid():
                collection = form.cleaned_data["collection"]
                if form.cleaned_data["rebuild"]:
                    _require(_has_perm(request, "change", Collection))
                stored = []
                for upload in form.cleaned_data["files"]:
                    try:
                        stored.append(upload_document(collection=collection, name=upload.name, content=upload).name)
                    except RagsiteError as exc:
                        self.message_user(request, f"Refused: {exc.message}", messages.ERROR)
                if stored:
                    self.message_user(
                        request,
                        f"Uploaded to {collection.name}: {', '.join(stored)}. The next build reads them.",
                        messages.SUCCESS,
                    )
                    if form.cleaned_data["rebuild"]:
                        run = request_build_or_say_why(self, request, collection)
                        if run is not None:
                            self.message_user(request, f"Build {run.pk} of {collection.name} requested.", messages.SUCCESS)
                    return HttpResponseRedirect(
                        reverse("admin:collections_app_collection_change", args=[collection.pk])
                    )
        else:
            form = UploadForm(initial={"collection": request.GET.get("collection")})
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Upload documents",
            "form": form,
            "max_bytes": int(conf.settings.MAX_UPLOAD_BYTES),
            "suffixes": ", ".join(SUPPORTED_SUFFIXES),
        }
        return TemplateResponse(request, "admin/collections_app/document/upload.html", context)


# --- Paragraphs --------------------------------------------------------------------


class UnlabelledFilter(admin.SimpleListFilter):
    title = "unlabelled"
    parameter_name = "unlabelled"

    def lookups(self, request, model_admin):
        return [("yes", "unlabelled (any reader may read)"), ("no", "labelled")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(labels__isnull=True)
        if self.value() == "no":
            return queryset.filter(labels__isnull=False).distinct()
        return queryset


class DocumentFilter(admin.SimpleListFilter):
    """Documents of the chosen collection (of all collections when none is chosen)."""

    title = "document"
    parameter_name = "document"

    def lookups(self, request, model_admin):
        documents = Document.objects.select_related("collection").order_by("collection__name", "name")
        collection = request.GET.get("collection__id__exact")
        if collection and collection.isdigit():
            documents = documents.filter(collection_id=int(collection))
            return [(str(d.pk), d.name) for d in documents[:200]]
        return [(str(d.pk), f"{d.collection.name}/{d.name}") for d in documents[:200]]

    def queryset(self, request, queryset):
        value = self.value()
        if value and value.isdigit():
            return queryset.filter(document_id=int(value))
        return queryset


class SectionFilter(admin.SimpleListFilter):
    """Section headings of the chosen document or collection."""

    title = "section"
    parameter_name = "section"

    def lookups(self, request, model_admin):
        paragraphs = Paragraph.objects.all()
        document, collection = request.GET.get("document"), request.GET.get("collection__id__exact")
        if document and document.isdigit():
            paragraphs = paragraphs.filter(document_id=int(document))
        elif collection and collection.isdigit():
            paragraphs = paragraphs.filter(collection_id=int(collection))
        sections = paragraphs.exclude(section="").order_by("section").values_list("section", flat=True).distinct()
        return [(s, s[:60]) for s in sections[:100]]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(section=self.value())
        return queryset


class LabelChoiceForm(forms.Form):
    """The intermediate page of "Add labels…" / "Remove labels…"."""

    labels = forms.ModelMultipleChoiceField(
        queryset=Label.objects.all(), required=False, widget=forms.CheckboxSelectMultiple
    )
    new_labels = forms.CharField(
        required=False, max_length=1000, label="New labels",
        help_text="Comma-separated names of labels to create and add (letters, digits, '-', '_').",
    )

    def __init__(self, *args, mode: str, labels_queryset=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.mode = mode
        if labels_queryset is not None:
            self.fields["labels"].queryset = labels_queryset
        if mode != "add":
            del self.fields["new_labels"]

    def chosen(self) -> list[Label]:
        chosen = list(self.cleaned_data["labels"])
        if self.mode == "add" and self.cleaned_data.get("new_labels"):
            try:
                names = [n.strip() for n in self.cleaned_data["new_labels"].split(",")]
                chosen += [label for label in labels_named(names, create=True) if label not in chosen]
            except RagsiteError as exc:
                self.add_error("new_labels", exc.message)
                return []
        if not chosen:
            self.add_error(None, "Choose at least one label.")
        return chosen


class ParagraphLabelsForm(forms.ModelForm):
    class Meta:
        model = Paragraph
        fields = ["labels"]


@admin.register(Paragraph)
class ParagraphAdmin(admin.ModelAdmin):
    form = ParagraphLabelsForm
    list_display = ["citation", "collection", "section", "labels_shown", "excerpt"]
    list_filter = ["collection", DocumentFilter, SectionFilter, "labels", UnlabelledFilter]
    search_fields = ["text"]
    list_select_related = ["document", "collection__agent"]
    list_per_page = 50
    actions = ["add_labels_action", "remove_labels_action"]
    fieldsets = [
        ("Where", {"fields": ["collection", "document_link", "citation", "section", "position"]}),
        ("Text, with its neighbours", {"fields": ["previous_paragraph", "text_shown", "next_paragraph"]}),
        ("Who may read it", {"fields": ["labels"]}),
    ]
    readonly_fields = ["collection", "document_link", "citation", "section", "position", "previous_paragraph",
                       "text_shown", "next_paragraph"]
    filter_horizontal = ["labels"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding").prefetch_related("labels")

    def has_add_permission(self, request):
        return False  # paragraphs are made by builds

    def has_delete_permission(self, request, obj=None):
        return False  # ...and removed by them, never one at a time

    @admin.display(description="paragraph", ordering="ordinal")
    def citation(self, paragraph):
        return f"{paragraph.document.name}#{paragraph.index}"

    @admin.display(description="labels")
    def labels_shown(self, paragraph):
        names = [label.name for label in paragraph.labels.all()]
        if not names:
            return format_html('<span class="rs-refused-none">{}</span>', "unlabelled")
        return ", ".join(names)

    @admin.display(description="text")
    def excerpt(self, paragraph):
        text = " ".join(paragraph.text.split())
        return text[:140] + ("…" if len(text) > 140 else "")

    @admin.display(description="document")
    def document_link(self, paragraph):
        url = reverse("admin:collections_app_document_change", args=[paragraph.document_id])
        return format_html('<a href="{}">{}</a> ({})', url, paragraph.document.name, paragraph.document.get_status_display())

    @admin.display(description="position")
    def position(self, paragraph):
        return (f"paragraph {paragraph.index + 1} of its document, {paragraph.ordinal + 1} of the collection; "
                f"characters {paragraph.start_char}–{paragraph.end_char}; {paragraph.token_count or '?'} tokens")

    @admin.display(description="text")
    def text_shown(self, paragraph):
        return text_block(paragraph.text, "rs-current")

    def _neighbour(self, paragraph, step: int, edge: str):
        other = Paragraph.objects.filter(document_id=paragraph.document_id, index=paragraph.index + step).first()
        if other is None:
            return format_html('<span class="rs-refused-none">{}</span>', edge)
        url = reverse("admin:collections_app_paragraph_change", args=[other.pk])
        return format_html('<a href="{}">{}#{}</a>{}', url, paragraph.document.name, other.index,
                           text_block(other.text, "rs-neighbour"))

    @admin.display(description="previous")
    def previous_paragraph(self, paragraph):
        return self._neighbour(paragraph, -1, "the start of the document")

    @admin.display(description="next")
    def next_paragraph(self, paragraph):
        return self._neighbour(paragraph, +1, "the end of the document")

    def save_related(self, request, form, formsets, change):
        labels = form.cleaned_data.pop("labels", None)
        super().save_related(request, form, formsets, change)
        if labels is not None:
            set_paragraph_labels(paragraph=form.instance, labels=labels)

    # -- bulk labelling through an intermediate page

    @admin.action(description="Add labels…", permissions=["change"])
    def add_labels_action(self, request, queryset):
        return self._label_action(request, queryset, "add")

    @admin.action(description="Remove labels…", permissions=["change"])
    def remove_labels_action(self, request, queryset):
        return self._label_action(request, queryset, "remove")

    def _label_action(self, request, queryset, mode: str):
        held = None
        if mode == "remove":
            held = Label.objects.filter(paragraphs__in=queryset).distinct()
        applying = "apply" in request.POST
        form = LabelChoiceForm(request.POST if applying else None, mode=mode, labels_queryset=held)
        if applying and form.is_valid():
            labels = form.chosen()
            if labels:
                names = ", ".join(label.name for label in labels)
                if mode == "add":
                    changed = add_labels(queryset, labels)
                    text = f"Added {names} to {queryset.count()} paragraph(s) ({changed} new label(s) given)."
                else:
                    changed = remove_labels(queryset, labels)
                    text = f"Removed {names} from {changed} paragraph label(s)."
                self.message_user(request, text, messages.SUCCESS)
                return None  # back to the changelist, filters kept
        select_across = request.POST.get("select_across") == "1"
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Add labels to paragraphs" if mode == "add" else "Remove labels from paragraphs",
            "mode": mode,
            "form": form,
            "action": f"{mode}_labels_action",
            "count": queryset.count(),
            "sample": list(queryset.select_related("document")[:10]),
            "select_across": select_across,
            "selected": [] if select_across else request.POST.getlist(ACTION_CHECKBOX_NAME),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "form_url": request.get_full_path(),
        }
        return TemplateResponse(request, "admin/collections_app/paragraph/label_action.html", context)


# --- Builds and the ledger ---------------------------------------------------------


@admin.register(CollectionBuilt)
class CollectionBuiltAdmin(admin.ModelAdmin):
    list_display = ["collection", "model", "dimensions", "method", "passages", "built_at", "refused_shown"]
    list_select_related = ["collection__agent"]

    @admin.display(description="refused")
    def refused_shown(self, obj):
        return refused_html(obj.refused)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(BuildRun)
class BuildRunAdmin(admin.ModelAdmin):
    list_display = ["id", "collection", "status_shown", "percent_shown", "passages", "model", "requested_by",
                    "created_at", "finished_at"]
    list_filter = ["status", "collection"]
    list_select_related = ["collection__agent"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="status", ordering="status")
    def status_shown(self, run):
        return status_badge(run.status)

    @admin.display(description="progress")
    def percent_shown(self, run):
        return f"{run.percent} %"


@admin.register(ModelCall)
class ModelCallAdmin(admin.ModelAdmin):
    list_display = ["created_at", "agent", "collection", "purpose", "model", "tokens_in", "tokens_out", "cost"]
    list_filter = ["purpose", "agent", "model"]
    list_select_related = ["agent", "collection__agent"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
