"""The identity provider's groups and the labels each gives: what a reader named by a signed reader
token may read (docs/operations.md, "Readers from the identity provider")."""

from django.contrib import admin

from ..models import IdpGroup, ProvisionedUser
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


@admin.register(ProvisionedUser)
class ProvisionedUserAdmin(admin.ModelAdmin):
    """The people the identity provider keeps here over SCIM: read only, the provider is their source
    (docs/operations.md, "Provisioning readers")."""

    list_display = ["user_name", "display_name", "reader", "active", "groups_shown", "modified_at"]
    list_filter = ["groups", ("reader__withdrawn_at", admin.EmptyFieldListFilter)]
    search_fields = ["user_name", "external_id", "display_name", "reader__external_id"]
    readonly_fields = ["user_name", "external_id", "display_name", "reader", "groups", "created_at"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("reader").prefetch_related("groups")

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False  # de-provisioning is the provider's (it withdraws the reader; a delete here would not)

    @admin.display(boolean=True, description="active")
    def active(self, person):
        return person.active

    @admin.display(description="groups")
    def groups_shown(self, person):
        return ", ".join(group.name for group in person.groups.all()) or "—"
