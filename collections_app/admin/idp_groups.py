"""The identity provider's groups and the labels each gives: what a reader named by a signed reader
token may read (docs/operations.md, "Readers from the identity provider")."""

from django.contrib import admin

from ..models import IdpGroup
from ..services.scim import refresh_group_members


@admin.register(IdpGroup)
class IdpGroupAdmin(admin.ModelAdmin):
    list_display = ["name", "labels_shown", "provisioned"]
    list_filter = ["labels"]
    search_fields = ["name"]
    filter_horizontal = ["labels"]

    readonly_fields = ["provisioned", "external_id"]

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        # People provisioned over SCIM hold their groups' labels as stored, not read per search.
        refresh_group_members(group=form.instance)

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("labels")

    @admin.display(description="labels")
    def labels_shown(self, group):
        return ", ".join(label.name for label in group.labels.all()) or "—"
