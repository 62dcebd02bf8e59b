"""The build records in the admin, read-only: the store's metadata, built states and every build run."""

from django.contrib import admin
from django.utils.html import format_html

from ..models import (
    BuildRun,
    CollectionBuilt,
    StoreMeta,
)
from .common import (
    count_of,
    refused_html,
    refused_with_reasons,
    status_badge,
    warning_list,
)


@admin.register(StoreMeta)
class StoreMetaAdmin(admin.ModelAdmin):
    list_display = ["key", "value"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(CollectionBuilt)
class CollectionBuiltAdmin(admin.ModelAdmin):
    list_display = ["collection", "model", "dimensions", "method", "paragraphs", "built_at", "refused_shown"]
    list_select_related = ["collection__agent"]

    @admin.display(description="paragraphs", ordering="passages")
    def paragraphs(self, obj):
        return obj.passages  # the column keeps seed 000's name; people read "paragraphs"

    @admin.display(description="refused")
    def refused_shown(self, obj):
        return refused_html(obj.refused)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(BuildRun)
class BuildRunAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "collection",
        "status_shown",
        "percent_shown",
        "paragraphs",
        "model",
        "requested_by",
        "created_at",
        "finished_at",
    ]
    list_filter = ["status", "collection"]
    list_select_related = ["collection__agent"]
    fields = [
        "collection",
        "status_shown",
        "percent_shown",
        "requested_by",
        "created_at",
        "started_at",
        "finished_at",
        "documents_shown",
        "paragraphs",
        "paragraphs_embedded",
        "model",
        "previous_model",
        "refused_shown",
        "warnings_shown",
    ]
    readonly_fields = fields

    @admin.display(description="paragraphs", ordering="passages")
    def paragraphs(self, run):
        return run.passages

    @admin.display(description="documents")
    def documents_shown(self, run):
        return (
            f"{run.documents_total} seen: {run.documents_read} read, {run.documents_reused} reused "
            f"unchanged, {run.documents_refused} refused"
            + (f" ({run.documents_relabelled} of them re-labelled)" if run.documents_relabelled else "")
            + (f"; {count_of(run.ocr_pages, 'page')} read by OCR" if run.ocr_pages else "")
        )

    @admin.display(description="refused")
    def refused_shown(self, run):
        # The record's three answers stay apart; the reason categories are for people, beside the names.
        if run.status not in BuildRun.LIVE:
            return format_html(
                '<span class="rs-refused-none">{}</span>', "not recorded: the build did not finish"
            )
        return refused_with_reasons(run.refused, run.refusal_reasons)

    @admin.display(description="warnings and problems")
    def warnings_shown(self, run):
        return warning_list([*([run.error] if run.error else []), *run.problems, *run.warnings])

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
