"""The identity provider's groups and the labels each gives: what a reader named by a signed reader
token may read (docs/operations.md, "Readers from the identity provider")."""

from django.contrib import admin

from ..models import IdpGroup


@admin.register(IdpGroup)
class IdpGroupAdmin(admin.ModelAdmin):
    list_display = ["name", "labels_shown"]
    list_filter = ["labels"]
    search_fields = ["name"]
    filter_horizontal = ["labels"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("labels")

    @admin.display(description="labels")
    def labels_shown(self, group):
        return ", ".join(label.name for label in group.labels.all()) or "—"
