"""The Django admin for people: staff only. Actions are thin adapters over services."""

from django.contrib import admin, messages
from django.utils.html import format_html

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


def refused_display(refused) -> str:
    """The three answers of `refused`, never collapsed: not recorded, nothing, or names."""
    if refused is None:
        return "not recorded"
    if not refused:
        return "nothing refused"
    return ", ".join(refused)


@admin.register(StoreMeta)
class StoreMetaAdmin(admin.ModelAdmin):
    list_display = ["key", "value"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    fields = ["name", "prefix", "may_act_for_others", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "revoked_at"]
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False  # keys are issued by an action, so the raw key can be shown once


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["agent_id", "name", "daily_budget", "runaway_limit", "created_at"]
    search_fields = ["agent_id", "name"]
    inlines = [ApiKeyInline]
    actions = ["issue_new_key"]

    @admin.action(description="Issue a new API key (shown once)")
    def issue_new_key(self, request, queryset):
        for agent in queryset:
            _key, raw = issue_key(agent=agent, name="issued in admin")
            self.message_user(request, f"New key for {agent.agent_id} (copy it now, it is not shown again): {raw}", messages.WARNING)


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = ["prefix", "agent", "name", "may_act_for_others", "created_at", "last_used_at", "revoked_at"]
    list_filter = ["revoked_at"]
    readonly_fields = ["prefix", "hashed", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Revoke selected keys")
    def revoke(self, request, queryset):
        for key in queryset:
            revoke_key(key=key)
        self.message_user(request, f"Revoked {queryset.count()} key(s).")


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ["name", "description"]
    search_fields = ["name"]


@admin.register(Reader)
class ReaderAdmin(admin.ModelAdmin):
    list_display = ["external_id"]
    search_fields = ["external_id"]
    filter_horizontal = ["labels"]


@admin.register(Collection)
class CollectionAdmin(admin.ModelAdmin):
    list_display = ["name", "agent", "method", "built_from", "per_reader", "judge", "build_summary"]
    list_filter = ["agent", "method", "per_reader"]
    search_fields = ["name", "built_from"]

    @admin.display(description="last build")
    def build_summary(self, obj):
        built = getattr(obj, "built", None)
        if built is None:
            return "never built"
        return format_html(
            "{} paragraphs, {} ({}), refused: {}", built.passages, built.model, built.dimensions, refused_display(built.refused)
        )


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["name", "collection", "status", "paragraph_count", "updated_at"]
    list_filter = ["status", "collection"]
    search_fields = ["name"]
    exclude = ["upload"]
    readonly_fields = ["fingerprint", "approved_fingerprint", "paragraph_count", "summary", "scan_warnings", "conflicts"]
    filter_horizontal = ["default_labels"]


@admin.register(Paragraph)
class ParagraphAdmin(admin.ModelAdmin):
    list_display = ["__str__", "collection", "section", "ordinal"]
    list_filter = ["collection"]
    search_fields = ["text"]
    exclude = ["embedding"]
    readonly_fields = ["agent_id", "collection", "document", "ordinal", "index", "section", "text", "start_char",
                       "end_char", "token_count", "fingerprint"]
    filter_horizontal = ["labels"]

    def has_add_permission(self, request):
        return False


@admin.register(CollectionBuilt)
class CollectionBuiltAdmin(admin.ModelAdmin):
    list_display = ["collection", "model", "dimensions", "method", "passages", "built_at", "refused_shown"]

    @admin.display(description="refused")
    def refused_shown(self, obj):
        return refused_display(obj.refused)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(BuildRun)
class BuildRunAdmin(admin.ModelAdmin):
    list_display = ["id", "collection", "status", "percent", "passages", "model", "created_at", "finished_at"]
    list_filter = ["status", "collection"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(ModelCall)
class ModelCallAdmin(admin.ModelAdmin):
    list_display = ["created_at", "agent", "collection", "purpose", "model", "tokens_in", "tokens_out", "cost"]
    list_filter = ["purpose", "agent", "model"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
