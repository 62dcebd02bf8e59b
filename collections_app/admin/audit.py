"""The read audit in the admin: read-only, filtered by agent, reader, collection and date, exported as
JSON Lines or CSV. Seeing it takes its own permission (view read audit), exporting another (export
read audit); nobody adds, edits or deletes an entry here (the hourly purge applies the retention)."""

from django.contrib import admin
from django.http import StreamingHttpResponse
from django.utils import timezone

from ..models import ReadAudit
from ..services.audit import export_lines

CONTENT_TYPES = {"jsonl": "application/x-ndjson; charset=utf-8", "csv": "text/csv; charset=utf-8"}


def export_response(entries, fmt: str) -> StreamingHttpResponse:
    """The entries as a download, streamed so a long trail is not held in memory."""
    response = StreamingHttpResponse(export_lines(entries.iterator(), fmt), content_type=CONTENT_TYPES[fmt])
    stamp = timezone.now().strftime("%Y%m%d-%H%M%S")
    response["Content-Disposition"] = f'attachment; filename="read-audit-{stamp}.{fmt}"'
    return response


@admin.register(ReadAudit)
class ReadAuditAdmin(admin.ModelAdmin):
    list_display = [
        "at",
        "agent_id",
        "channel",
        "kind",
        "target",
        "reader",
        "on_behalf_of",
        "status",
        "size",
        "returned",
    ]
    list_filter = ["agent_id", "reader", "target", "kind", "channel", "staff_user", "status"]
    date_hierarchy = "at"
    list_per_page = 100
    actions = ["export_jsonl", "export_csv"]
    fields = [
        "at",
        "agent_id",
        "key_id",
        "staff_user",
        "channel",
        "kind",
        "target",
        "reader",
        "on_behalf_of",
        "question",
        "question_sha256",
        "ids",
        "size",
        "status",
    ]
    readonly_fields = fields

    @admin.display(description="ids returned")
    def returned(self, entry):
        return len(entry.ids)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def has_export_permission(self, request) -> bool:
        return request.user.has_perm("collections_app.export_readaudit")

    @admin.action(description="Export the selected entries as JSON Lines", permissions=["export"])
    def export_jsonl(self, request, queryset):
        return export_response(queryset.order_by("at", "id"), "jsonl")

    @admin.action(description="Export the selected entries as CSV", permissions=["export"])
    def export_csv(self, request, queryset):
        return export_response(queryset.order_by("at", "id"), "csv")
