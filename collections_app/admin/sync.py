"""Folder sync on the collection page: switch it on, set the period, read last checked / last changed / next
check.

Two fields of the collection's own form (no inline, so a form posted without them changes nothing), saved
through `services.sync.set_sync`, which decides when the next check is due.
"""

from django import forms
from django.contrib import admin
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from .. import conf
from ..models import CollectionSync
from ..services import sync
from .common import status_badge

SYNC_FIELDS = [
    "sync",
    "sync_every",
    "sync_last_checked",
    "sync_last_changed",
    "sync_next_check",
    "sync_outcome",
]
READONLY = SYNC_FIELDS[2:]
# The period offered when SYNC_EVERY is 0 (new collections do not sync) and a person ticks the box.
DEFAULT_EVERY = 5


def sync_form_fields() -> tuple[forms.Field, forms.Field]:
    """The two fields the collection form declares: ``sync`` and ``sync_every``."""
    return (
        forms.BooleanField(
            required=False,
            label="Keep in sync",
            help_text="Check the folder every few minutes and build when a file was added, changed "
            "or deleted; nothing is built while nothing changed. On for a new collection with a folder; "
            "off, the folder is read only when you press Rebuild.",
        ),
        forms.IntegerField(
            required=False,
            min_value=sync.MIN_EVERY,
            max_value=sync.MAX_EVERY,
            label="Check every (minutes)",
        ),
    )


def sync_initial(form: forms.ModelForm) -> None:
    """Show the collection's current sync setting in the form; a new collection starts at SYNC_EVERY."""
    state = CollectionSync.objects.filter(collection=form.instance).first() if form.instance.pk else None
    if state is not None:
        form.fields["sync"].initial = state.enabled
        form.fields["sync_every"].initial = state.every
    elif not form.instance.pk:
        every = conf.sync_every()
        form.fields["sync"].initial = every is not None
        form.fields["sync_every"].initial = every or DEFAULT_EVERY
    else:
        form.fields["sync_every"].initial = conf.sync_every() or DEFAULT_EVERY


def folder_changed_notice(collection) -> dict | None:
    """The collection page's note when a check saw the folder change after the live build was made."""
    state = CollectionSync.objects.select_related("last_build").filter(collection=collection).first()
    if state is None or not sync.changed_since_build(collection, state):
        return None
    build = state.last_build
    return {
        "seen": _moment(state.last_changed_at, ""),
        "outcome": state.last_outcome,
        "build": build.pk if build is not None else None,
        "status": build.status if build is not None else "",
    }


def _moment(value, empty: str):
    if value is None:
        return empty
    return format_html(
        '<time datetime="{}">{}</time>',
        value.isoformat(),
        timezone.localtime(value).strftime("%Y-%m-%d %H:%M:%S"),
    )


class SyncAdminMixin:
    """For the collection admin: saves the sync fields and shows what the checks found."""

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        # A new collection takes the box as shown (ticked by default), touched or not.
        if not change or {"sync", "sync_every"} & set(form.changed_data):
            enabled, every = form.cleaned_data.get("sync"), form.cleaned_data.get("sync_every")
            if enabled or change:
                sync.set_sync(collection=obj, every=(every or DEFAULT_EVERY) if enabled else None)

    def _sync(self, collection):
        return (
            CollectionSync.objects.select_related("last_build").filter(collection=collection).first()
            if collection.pk
            else None
        )

    @admin.display(description="last checked")
    def sync_last_checked(self, collection):
        state = self._sync(collection)
        return _moment(state.last_checked_at if state else None, "never")

    @admin.display(description="last changed")
    def sync_last_changed(self, collection):
        state = self._sync(collection)
        return _moment(state.last_changed_at if state else None, "no change seen yet")

    @admin.display(description="next check")
    def sync_next_check(self, collection):
        state = self._sync(collection)
        if state is None or not state.enabled:
            return "— (not syncing)"
        return _moment(state.next_check_at, "within a minute")

    @admin.display(description="last check found")
    def sync_outcome(self, collection):
        state = self._sync(collection)
        if state is None or not state.last_outcome:
            return "—"
        if state.last_build is None:
            return state.last_outcome
        url = reverse("admin:collections_app_buildrun_change", args=[state.last_build.pk])
        return format_html(
            '{} · <a href="{}" data-role="sync-build">build {}</a> {}',
            state.last_outcome,
            url,
            state.last_build.pk,
            status_badge(state.last_build.status),
        )

    @admin.display(description="sync")
    def sync_state(self, collection):
        shown = sync.describe(collection)
        if shown is None:
            return "—"
        return format_html(
            "every {} min, next {}", shown["sync_every"], _moment(shown["next_check_at"], "within a minute")
        )
