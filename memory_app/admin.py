"""The Django admin for memory: staff only, read-mostly.

`RecordNode` has a composite primary key, which Django 5.2's admin cannot register, so a
record's nodes are shown on the record's own page instead (offsets, tokens, model), read-only.
Nodes are derived data: people never edit them, and the health repair rebuilds them.
"""

from django.contrib import admin
from django.utils.html import format_html_join

from .models import Episode, Memory, Record, RecordNode


class RecordAdmin(admin.ModelAdmin):
    list_display = ["id", "agent", "opening", "token_count", "embedding_model", "locked", "created_at"]
    list_filter = ["locked", "embedding_model"]
    search_fields = ["text", "agent__agent_id"]
    list_select_related = ["agent"]
    # The text is read-only here: a change must go through the service, which re-embeds the
    # record and queues its nodes (the trigger alone would only delete them).
    readonly_fields = ["agent", "text", "token_count", "embedding_model", "created_at", "updated_at", "nodes"]
    exclude = ["embedding"]

    def has_add_permission(self, request):
        return False

    @admin.display(description="opening")
    def opening(self, record: Record) -> str:
        return record.text[:80] + ("…" if len(record.text) > 80 else "")

    @admin.display(description="nodes")
    def nodes(self, record: Record) -> str:
        rows = RecordNode.objects.filter(parent_kind=record.KIND, parent_id=record.pk).order_by("node_index")
        if not rows:
            return "none (the record fits the window, or its nodes are queued)"
        return format_html_join(
            "",
            "<div>#{}: characters {}–{}, {} tokens of {}, {}</div>",
            ((n.node_index, n.start_char, n.end_char, n.token_count, n.window, n.embedding_model or "?") for n in rows),
        )


admin.site.register(Memory, RecordAdmin)
admin.site.register(Episode, RecordAdmin)
