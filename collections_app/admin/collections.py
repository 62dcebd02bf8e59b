"""Collections and their builds: the collection list and page, rebuilds with live progress, build history."""

from django.contrib import admin, messages
from django.db.models import Count, JSONField, OuterRef, Q, Subquery
from django.http import Http404, HttpResponseRedirect, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import url_has_allowed_host_and_scheme, urlencode
from django.views.decorators.http import require_POST

from ..models import (
    BuildRun,
    Collection,
    CollectionBuilt,
    Document,
    KnownAnswersReport,
)
from ..services.analyzers import ANALYZER_CHANGED
from ..services.documents import collection_health, delete_collection, deletion_summary
from ..services.knowledge import describe_source
from ..services.readers.labels import PER_READER_SWITCHED, rebuild_after_switch, set_per_reader
from .collection_form import CollectionForm
from .common import (
    HISTORY_ROWS,
    backup_download,
    count_of,
    documents_line,
    progress_payload,
    refused_html,
    refused_with_reasons,
    request_build_or_say_why,
    require,
    status_badge,
    warning_list,
)
from .known_answers import KnownAnswersAdminMixin, known_answers_warnings
from .measure import MeasureAdminMixin
from .playground import PlaygroundAdminMixin
from .sync import READONLY as SYNC_READONLY
from .sync import SYNC_FIELDS, SyncAdminMixin, folder_changed_notice


def held_back_notice(collection: Collection) -> dict | None:
    """The collection page's notice when documents wait in review, wholly or for some paragraphs, with the
    link to them: at the top of the page from the build that put them there (a conflicting file used to
    be seen only through the known answers it cost). ``most``: most of the collection's paragraphs are
    held back (a newcomer's first build held 110 of 186, said only in a parenthesis)."""
    waiting = collection.documents.filter(Q(status=Document.NEEDS_REVIEW) | Q(review_paragraphs=True))
    counts = waiting.aggregate(
        whole=Count("id", filter=Q(status=Document.NEEDS_REVIEW)),
        partly=Count("id", filter=Q(review_paragraphs=True)),
    )
    if not counts["whole"] and not counts["partly"]:
        return None
    health = collection_health(collection)
    review = (
        reverse("admin:collections_app_document_changelist")
        + "?"
        + urlencode({"collection__id__exact": collection.pk, "waiting": "1"})
    )
    return {
        "held_back": health["held_back"],
        "stored": health["stored"],
        "review_url": review,
        "percent": round(100 * health["held_back"] / health["stored"]) if health["stored"] else 0,
        "most": health["stored"] and health["held_back"] * 2 > health["stored"],
        "documents": count_of(counts["whole"] + counts["partly"], "document"),
        "whole": counts["whole"],
        "partly": counts["partly"],
    }


@admin.register(Collection)
class CollectionAdmin(
    SyncAdminMixin, KnownAnswersAdminMixin, PlaygroundAdminMixin, MeasureAdminMixin, admin.ModelAdmin
):
    form = CollectionForm
    list_display = [
        "name",
        "agent",
        "searchable",
        "last_build",
        "sync_state",
        "embedding_model",
        "refused",
        "warnings",
    ]
    list_filter = ["agent", "method", "per_reader"]
    search_fields = ["name", "built_from"]
    list_select_related = ["agent", "built"]
    actions = ["rebuild_selected", "download_backup"]
    readonly_fields = ["source", "searchable", "contents", "current_build", "build_history", *SYNC_READONLY]
    delete_confirmation_template = "admin/collections_app/collection/delete_confirmation.html"
    fieldsets = [
        (
            None,
            {
                "fields": [
                    "agent",
                    "name",
                    "built_from",
                    "folder",
                    "folder_variable_bound",
                    "source",
                    "searchable",
                    "contents",
                ]
            },
        ),
        ("Chunking", {"fields": ["method", "size", "overlap"]}),
        ("Search", {"fields": ["analyzer", "per_reader", "judge", "min_score", "floor_measured", "around"]}),
        ("Builds", {"fields": ["current_build", "build_history"]}),
        ("Folder sync", {"fields": SYNC_FIELDS}),
    ]

    def get_queryset(self, request):
        latest = BuildRun.objects.filter(collection=OuterRef("pk")).order_by("-created_at", "-id")
        return (
            super()
            .get_queryset(request)
            .annotate(
                last_run_id=Subquery(latest.values("pk")[:1]),
                last_status=Subquery(latest.values("status")[:1]),
                last_warnings=Subquery(latest.values("warnings")[:1], output_field=JSONField()),
                last_problems=Subquery(latest.values("problems")[:1], output_field=JSONField()),
                last_error=Subquery(latest.values("error")[:1]),
                last_known_warnings=Subquery(
                    KnownAnswersReport.objects.filter(build=OuterRef("last_run_id")).values("warnings")[:1],
                    output_field=JSONField(),
                ),
            )
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

    @admin.display(description="searchable")
    def searchable(self, collection):
        """Searchable next to stored paragraphs, with a warning badge when nothing can be found."""
        if collection.pk is None:
            return "—"
        health = collection_health(collection)
        text = format_html(
            '<span data-role="searchable">{}</span> of {} stored',
            f"{health['searchable']:,}",
            count_of(health["stored"], "paragraph"),
        )
        notes = []
        if health["disabled"]:
            notes.append(f"{health['disabled']:,} disabled")
        if health["held_back"]:
            notes.append(f"{health['held_back']:,} in review or refused")
        if notes:
            text = format_html("{} ({})", text, ", ".join(notes))
        if health["pending"] and not health["problems"]:
            active = collection.runs.filter(status__in=[BuildRun.QUEUED, BuildRun.RUNNING]).exists()
            return format_html(
                '<span class="rs-badge rs-pending" data-role="rebuild-pending">{}</span> {}'
                '<ul class="rs-warnings">{}</ul>',
                "rebuilding" if active else "answers; needs a rebuild",
                text,
                format_html_join("", "<li>{}</li>", ((p,) for p in health["pending"])),
            )
        if health["problems"]:
            return format_html(
                '<span class="rs-badge rs-status-failed" data-role="not-searchable">cannot answer</span> {}'
                '<ul class="rs-warnings">{}</ul>',
                text,
                format_html_join("", "<li>{}</li>", ((p,) for p in health["problems"] + health["pending"])),
            )
        return text

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
        items = (
            list(getattr(collection, "last_problems", None) or [])
            + list(getattr(collection, "last_warnings", None) or [])
            + list(getattr(collection, "last_known_warnings", None) or [])
        )
        error = getattr(collection, "last_error", None)
        if error:
            items.insert(0, error)
        return warning_list(items)

    # -- change page

    @admin.display(description="source")
    def source(self, collection):
        if collection.pk is None:
            return "—"
        folder = describe_source(collection)  # names a variable or a folder, never a path
        uploads = collection.documents.filter(source=Document.UPLOAD).count()
        upload_url = (
            reverse("admin:collections_app_document_upload") + "?" + urlencode({"collection": collection.pk})
        )
        return format_html(
            '{} and {} — <a href="{}">upload documents…</a>',
            folder,
            count_of(uploads, "uploaded document"),
            upload_url,
        )

    @admin.display(description="contents")
    def contents(self, collection):
        if collection.pk is None:
            return "—"
        counts = collection.documents.aggregate(
            total=Count("id"),
            review=Count("id", filter=Q(status=Document.NEEDS_REVIEW) | Q(review_paragraphs=True)),
            refused=Count("id", filter=Q(status=Document.REFUSED)),
        )
        documents = (
            reverse("admin:collections_app_document_changelist")
            + "?"
            + urlencode({"collection__id__exact": collection.pk})
        )
        review = documents + "&" + urlencode({"waiting": "1"})
        paragraphs = (
            reverse("admin:collections_app_paragraph_changelist")
            + "?"
            + urlencode({"collection__id__exact": collection.pk})
        )
        disabled = collection.documents.filter(enabled=False).count()
        disabled_paragraphs = collection.paragraphs.filter(enabled=False).count()
        return format_html(
            '<a href="{}">{}</a> (<a href="{}">{} need review</a>, {} refused, {} disabled) · <a '
            'href="{}">{}</a> '
            "({} disabled)",
            documents,
            count_of(counts["total"], "document"),
            review,
            counts["review"],
            counts["refused"],
            disabled,
            paragraphs,
            count_of(collection.paragraphs.count(), "paragraph"),
            disabled_paragraphs,
        )

    @admin.display(description="current build")
    def current_build(self, collection):
        built = self._built(collection) if collection.pk else None
        if built is None:
            return format_html('<span class="rs-refused-none">{}</span>', "never built")
        return format_html(
            "{} · {} ({} dimensions) · {} · built {} · refused: {}",
            count_of(built.passages, "paragraph"),
            built.model,
            built.dimensions,
            built.method,
            built.built_at.strftime("%Y-%m-%d %H:%M"),
            refused_with_reasons(built.refused, self._reasons(collection)),
        )

    @staticmethod
    def _reasons(collection) -> dict:
        return dict(collection.documents.filter(status=Document.REFUSED).values_list("name", "refusal"))

    @admin.display(description="build history")
    def build_history(self, collection):
        if collection.pk is None:
            return "—"
        runs = list(collection.runs.select_related("known_answers_report")[:HISTORY_ROWS])
        if not runs:
            return format_html('<span class="rs-refused-none">{}</span>', "no builds yet")
        rows = format_html_join(
            "",
            '<tr data-build="{}"><td><a href="{}">{}</a></td><td data-role="status">{}</td>'
            '<td data-role="percent">{} '
            "%</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    run.pk,
                    reverse("admin:collections_app_buildrun_change", args=[run.pk]),
                    run.number or run.pk,
                    status_badge(run.status),
                    run.percent,
                    run.created_at.strftime("%Y-%m-%d %H:%M"),
                    run.passages,
                    documents_line(run),
                    run.paragraphs_embedded,
                    refused_with_reasons(run.refused, run.refusal_reasons)
                    if run.status in BuildRun.LIVE
                    else "—",
                    warning_list(
                        [
                            *([run.error] if run.error else []),
                            *run.problems,
                            *run.warnings,
                            *known_answers_warnings(run),
                        ]
                    ),
                )
                for run in runs
            ),
        )
        more = (
            reverse("admin:collections_app_buildrun_changelist")
            + "?"
            + urlencode({"collection__id__exact": collection.pk})
        )
        return format_html(
            '<div class="rs-scroll"><table '
            'class="rs-history"><thead><tr><th>build</th><th>status</th><th>progress</th>'
            "<th>requested</th><th>paragraphs</th><th>documents</th><th>embedded</th><th>refused</th>"
            "<th>warnings</th></tr></thead><tbody>{}</tbody></table></div>"
            '<p><a href="{}">all builds of this collection</a></p>',
            rows,
            more,
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
                + "?"
                + urlencode({"collection": collection.pk})
                if self.may_use_playground(request)
                else "",
                measure_url=reverse("admin:collections_app_collection_measure")
                + "?"
                + urlencode({"collection": collection.pk}),
                runs=collection.measure_runs.select_related("collection").defer("report", "request")[:5],
                can_rebuild=self.has_change_permission(request, collection),
                held_back=held_back_notice(collection),
                folder_changed=folder_changed_notice(collection),
            )
        return super().change_view(request, object_id, form_url, extra_context)

    def changelist_view(self, request, extra_context=None):
        playground = (
            reverse("admin:collections_app_collection_playground") if self.may_use_playground(request) else ""
        )
        extra_context = {**(extra_context or {}), "playground_url": playground}
        return super().changelist_view(request, extra_context)

    # -- rebuilds

    def has_delete_permission(self, request, obj=None):
        # A collection takes its documents, paragraphs, history and uploads with it: superusers only.
        return request.user.is_superuser and super().has_delete_permission(request, obj)

    def get_actions(self, request):
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # one at a time, from its page, with what goes counted
        return actions

    def get_deleted_objects(self, objs, request):
        summary = deletion_summary(collections=objs)
        counts = {
            "documents": summary["documents"],
            "paragraphs": summary["paragraphs"],
            "uploaded files": summary["uploads"],
            "measurements": summary["measure_runs"],
        }
        return [str(o) for o in objs], counts, set(), []

    def delete_model(self, request, obj):
        delete_collection(collection=obj, by=request.user.get_username())

    @admin.action(description="Download a backup of the selected collection", permissions=["change"])
    def download_backup(self, request, queryset):
        # The archive holds every paragraph and document: change permission, as a rebuild asks.
        return backup_download(
            self, request, queryset, lambda c: ("collection", f"{c.agent.agent_id}-{c.name}")
        )

    @admin.action(description="Rebuild selected collections", permissions=["change"])
    def rebuild_selected(self, request, queryset):
        started = [c.name for c in queryset if request_build_or_say_why(self, request, c) is not None]
        if started:
            self.message_user(request, f"Build requested for {', '.join(started)}.", messages.SUCCESS)

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path(
                "<int:object_id>/rebuild/",
                wrap(require_POST(self.rebuild_view)),
                name="collections_app_collection_rebuild",
            ),
            path(
                "<int:object_id>/per-reader/",
                wrap(require_POST(self.per_reader_view)),
                name="collections_app_collection_per_reader",
            ),
            path(
                "<int:object_id>/progress/",
                wrap(self.progress_view),
                name="collections_app_collection_progress",
            ),
        ] + super().get_urls()

    def rebuild_view(self, request, object_id):
        collection = get_object_or_404(Collection, pk=object_id)
        require(self.has_change_permission(request, collection))
        run = request_build_or_say_why(self, request, collection)
        if run is not None:
            run.refresh_from_db()
            self.message_user(
                request,
                f"Build {run.number} of {collection.name} requested ({run.status}).",
                messages.SUCCESS,
            )
        return HttpResponseRedirect(reverse("admin:collections_app_collection_change", args=[collection.pk]))

    def per_reader_view(self, request, object_id):
        """The one-click switch beside "labels take effect when Per reader is on"; back to where it was
        pressed."""
        collection = get_object_or_404(Collection, pk=object_id)
        require(self.has_change_permission(request, collection))
        if set_per_reader(collection=collection, per_reader=True):
            self.message_user(
                request,
                f"Per reader is on for {collection.name}: labels now decide what each reader "
                "sees, and every search of it must name a reader.",
                messages.SUCCESS,
            )
            collection.refresh_from_db()
            self._rebuild_after_switch(request, collection)
        back = request.META.get("HTTP_REFERER", "")
        if not url_has_allowed_host_and_scheme(
            back, allowed_hosts={request.get_host()}, require_https=request.is_secure()
        ):
            back = reverse("admin:collections_app_collection_change", args=[collection.pk])
        return HttpResponseRedirect(back)

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if change and obj.rebuild_needed == PER_READER_SWITCHED and "per_reader" in form.changed_data:
            self._rebuild_after_switch(request, obj)
        elif change and obj.rebuild_needed == ANALYZER_CHANGED and form.analyzer_changed:
            self._rebuild_after_switch(request, obj, follows="the keyword index reads words the new way")

    def _rebuild_after_switch(
        self, request, collection, follows="each paragraph's title and vector follow it"
    ):
        """Queue the rebuild a switch (per reader, the analyzer) needs, and say so (or why not)."""
        run, why = rebuild_after_switch(
            collection=collection, requested_by=f"admin:{request.user.get_username()}"
        )
        if run is not None:
            said = f"Build {run.number} of {collection.name} queued so that {follows}; until it is live"
            self.message_user(request, f"{said}, agents get the last build.", messages.SUCCESS)
        else:
            self.message_user(
                request, f"Rebuild not queued ({why}): press Rebuild once it can start.", messages.WARNING
            )

    def progress_view(self, request, object_id):
        """The progress bar's data: the latest build of the collection (or `?build=<id>`), as JSON."""
        collection = get_object_or_404(Collection, pk=object_id)
        require(self.has_view_permission(request, collection))
        runs = collection.runs.all()
        build = request.GET.get("build")
        if build:
            if not build.isdigit():
                raise Http404
            run = get_object_or_404(runs, pk=int(build))
        else:
            run = runs.first()
        return JsonResponse(progress_payload(run))  # admin_view marks it never-cache
