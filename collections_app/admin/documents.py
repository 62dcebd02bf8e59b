"""Documents: review and approval, default labels, uploads."""

from django import forms
from django.contrib import admin, messages
from django.db.models import Q
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from ragsite.errors import RagsiteError

from .. import conf
from ..models import (
    Collection,
    Document,
)
from ..services.documents import delete_document, deletion_summary, set_documents_enabled
from ..services.readers.labels import set_default_labels
from ..services.review import (
    approval_warnings,
    approve_documents,
    build_unbuilt_after_approval,
    conflicting_documents,
    conflicting_paragraphs,
)
from ..services.uploads import upload_documents
from ..text.extract import SUPPORTED_SUFFIXES
from .common import (
    count_of,
    has_perm,
    request_build_or_say_why,
    require,
    status_badge,
)
from .sources import DocumentSourceShown


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        # An empty file is judged with the others by `upload_documents`, not refused for the whole form.
        kwargs.setdefault("allow_empty_file", True)
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(d, initial) for d in data]
        return [single(data, initial)]


class UploadForm(forms.Form):
    collection = forms.ModelChoiceField(queryset=Collection.objects.select_related("agent"))
    files = MultipleFileField(
        help_text="PDF, Word, Markdown, text or HTML; read by the collection's next build."
    )
    rebuild = forms.BooleanField(required=False, label="Rebuild the collection afterwards")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["collection"].label_from_instance = lambda c: f"{c.agent.agent_id} / {c.name}"


class DocumentDefaultLabelsForm(forms.ModelForm):
    class Meta:
        model = Document
        fields = ["enabled", "default_labels"]
        labels = {"enabled": "Enabled (searched)"}
        help_texts = {
            "default_labels": "Labels every paragraph of this document carries: a label added here is given "
            "to its paragraphs now, and one removed here is taken off them."
        }


class WaitingFilter(admin.SimpleListFilter):
    """The review queue: documents waiting for a person, wholly or for some paragraphs."""

    title, parameter_name = "waiting for review", "waiting"

    def lookups(self, request, model_admin):
        return [("1", "wholly or some paragraphs")]

    def queryset(self, request, queryset):
        if self.value() == "1":
            return queryset.filter(Q(status=Document.NEEDS_REVIEW) | Q(review_paragraphs=True))
        return queryset


@admin.register(Document)
class DocumentAdmin(DocumentSourceShown, admin.ModelAdmin):
    form = DocumentDefaultLabelsForm
    list_display = [
        "name_shown",
        "status_shown",
        "review_shown",
        "paragraphs",
        "collection",
        "origin_shown",
        "default_labels_shown",
    ]
    list_filter = [WaitingFilter, "status", "enabled", "collection", "source", "refusal"]
    search_fields = ["name"]
    list_select_related = ["collection__agent", "collection__origin"]
    actions = ["approve", "enable_action", "disable_action"]
    delete_confirmation_template = "admin/collections_app/document/delete_confirmation.html"
    # `upload` is never a field here: its value is a storage path.
    fields = [
        "collection",
        "name",
        "origin_shown",
        "source_readers_shown",
        "status_shown",
        "enabled",
        "approval",
        "fingerprint",
        "paragraphs_link",
        "ocr_shown",
        "summary",
        "attributes_shown",
        "warnings_shown",
        "conflicts_side_by_side",
        "default_labels",
        "updated_at",
    ]
    # Everything shown is read-only but the two things a person sets here.
    readonly_fields = [name for name in fields if name not in ("enabled", "default_labels")]
    filter_horizontal = ["default_labels"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("default_labels")

    def has_add_permission(self, request):
        return False  # documents come from a folder or from the upload page

    def has_delete_permission(self, request, obj=None):
        # Deleting takes paragraphs out of search at once: superusers only.
        return request.user.is_superuser and super().has_delete_permission(request, obj)

    def get_actions(self, request):
        # One document at a time, from its page, where the confirmation says what goes and what the
        # empty-store rule refuses; a bulk delete could not say which one was refused.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    @admin.display(description="document", ordering="name")
    def name_shown(self, document):
        if not document.enabled:
            return format_html(
                '<s class="rs-disabled" title="disabled: never searched">{}</s> '
                '<span class="rs-badge">disabled</span>',
                document.name,
            )
        return document.name

    @admin.display(description="status", ordering="status")
    def status_shown(self, document):
        badge = status_badge(document.get_status_display())
        if waits_in_review(document) and document.status == Document.ACTIVE:
            # Searched, less the paragraphs that contradict another document's: those wait for a person.
            return format_html("{} {} (some paragraphs)", badge, status_badge("needs review"))
        if document.status == Document.REFUSED and document.refusal:
            return format_html(
                '{} <span class="rs-refusal" data-role="refusal">{}</span>', badge, document.refusal
            )
        return badge

    @admin.display(description="why in review")
    def review_shown(self, document):
        items = list(document.scan_warnings) + list(document.conflicts)
        if not items or not waits_in_review(document):
            # Approved (this version) or refused: the reason no longer holds it back.
            return (
                f"approved by {document.approved_by or 'an unknown user'}"
                if items and document.approved_at
                else "—"
            )
        return format_html(
            '<ul class="rs-warnings">{}</ul>', format_html_join("", "<li>{}</li>", ((w,) for w in items))
        )

    @admin.display(description="approval")
    def approval(self, document):
        if not document.approved_at:
            return "not approved by anybody" if waits_in_review(document) else "—"
        return (
            f"approved by {document.approved_by or 'an unknown user'} "
            f"on {document.approved_at:%Y-%m-%d %H:%M}"
        )

    @admin.display(description="conflicts")
    def conflicts_side_by_side(self, document):
        if not document.conflicts:
            return "—"
        parts = [
            format_html(
                '<ul class="rs-warnings">{}</ul>',
                format_html_join("", "<li>{}</li>", ((c,) for c in document.conflicts)),
            )
        ]
        for other in conflicting_documents(document):
            url = reverse("admin:collections_app_document_change", args=[other.pk])
            pairs = conflicting_paragraphs(document, other)
            paragraph = "admin:collections_app_paragraph_change"
            rows = format_html_join(
                "",
                '<tr><td><a href="{}" data-role="mine">{}</a><div class="rs-text">{}</div></td>'
                '<td><a href="{}" data-role="theirs">{}</a>{}<div class="rs-text">{}</div></td></tr>',
                (
                    (
                        reverse(paragraph, args=[pair.mine_paragraph]),
                        pair.mine_chunk_id,
                        pair.mine,
                        reverse(paragraph, args=[pair.theirs_paragraph]),
                        pair.theirs_chunk_id,
                        # Both sides wait when neither was answering (a first build): say so on this side.
                        mark_safe(' <span data-role="theirs-waits">waits in review too</span>')
                        if pair.theirs_in_review
                        else "",
                        pair.theirs,
                    )
                    for pair in pairs
                ),
            )
            state = other.get_status_display()
            if other.status == Document.ACTIVE and other.review_paragraphs:
                state = f"{state}, some paragraphs in review"
            parts.append(
                format_html(
                    '<table class="rs-side-by-side" data-other="{}"><thead><tr><th>this document</th>'
                    '<th><a href="{}">{}</a> ({})</th></tr></thead><tbody>{}</tbody></table>',
                    other.name,
                    url,
                    other.name,
                    state,
                    rows,
                )
            )
        return format_html_join("", "{}", ((p,) for p in parts))

    @admin.display(description="paragraphs", ordering="paragraph_count")
    def paragraphs(self, document):
        return document.paragraph_count if document.fingerprint else "—"

    @admin.display(description="read by OCR")
    def ocr_shown(self, document):
        # Text a machine read off a picture: a reviewer may want to check it against the page.
        return count_of(document.ocr_pages, "page") if document.ocr_pages else "—"

    @admin.display(description="warnings")
    def warnings_shown(self, document):
        # Scan warnings sent it to review; notes (read_notes) did not, and are said beside them.
        items = [*document.scan_warnings, *document.read_notes]
        if not items:
            return "—"
        return format_html(
            '<ul class="rs-warnings" data-role="document-warnings">{}</ul>',
            format_html_join("", "<li>{}</li>", ((w,) for w in items)),
        )

    @admin.display(description="conflicts")
    def conflicts_shown(self, document):
        if not document.conflicts:
            return "—"
        return format_html(
            '<ul class="rs-warnings">{}</ul>',
            format_html_join("", "<li>{}</li>", ((c,) for c in document.conflicts)),
        )

    @admin.display(description="default labels")
    def default_labels_shown(self, document):
        return ", ".join(label.name for label in document.default_labels.all()) or "—"

    @admin.display(description="paragraphs")
    def paragraphs_link(self, document):
        url = (
            reverse("admin:collections_app_paragraph_changelist") + "?" + urlencode({"document": document.pk})
        )
        if not document.fingerprint:
            return "not built yet: the next build reads it"
        return format_html('<a href="{}">{}</a>', url, count_of(document.paragraph_count, "paragraph"))

    def save_related(self, request, form, formsets, change):
        # Default labels go through the service, which also applies them to the paragraphs.
        labels = form.cleaned_data.pop("default_labels", None)
        super().save_related(request, form, formsets, change)
        if labels is not None:
            added, removed = set_default_labels(document=form.instance, labels=labels)
            if added or removed:
                self.message_user(
                    request, f"Paragraph labels: {added} added, {removed} removed.", messages.INFO
                )

    @admin.action(description="Approve selected documents (needs review → active)", permissions=["change"])
    def approve(self, request, queryset):
        waiting = queryset.filter(Q(status=Document.NEEDS_REVIEW) | Q(review_paragraphs=True))
        for warning in approval_warnings(list(waiting)):
            self.message_user(request, warning, messages.WARNING)
        approved = approve_documents(queryset, by=request.user)
        skipped = queryset.count() - len(approved)
        text = (
            f"Approved {count_of(len(approved), 'document')}: {', '.join(d.name for d in approved)}."
            if approved
            else "No document was approved."
        )
        if skipped:
            text += (
                f" {count_of(skipped, 'other')} {'was' if skipped == 1 else 'were'} not waiting for review "
                "and left alone."
            )
        self.message_user(request, text, messages.SUCCESS if approved else messages.WARNING)
        self._build_unbuilt(request, approved)

    def _build_unbuilt(self, request, approved) -> None:
        who = f"approval by {request.user.get_username()}"
        for name, problem in build_unbuilt_after_approval(approved, requested_by=who).items():
            if problem:
                self.message_user(
                    request,
                    f'Collection "{name}" was never built, and no build could be queued: {problem}',
                    messages.WARNING,
                )
            else:
                self.message_user(
                    request,
                    f'Collection "{name}" was never built: a build was queued so the '
                    "approved documents are searched once it finishes.",
                    messages.INFO,
                )

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("upload/", wrap(self.upload_view), name="collections_app_document_upload"),
            path(
                "<path:object_id>/approve/",
                wrap(require_POST(self.approve_view)),
                name="collections_app_document_approve",
            ),
        ] + super().get_urls()

    @admin.action(description="Enable (search them again)", permissions=["change"])
    def enable_action(self, request, queryset):
        changed = set_documents_enabled(documents=queryset, enabled=True)
        self.message_user(request, f"Enabled {count_of(changed, 'document')}.", messages.SUCCESS)

    @admin.action(description="Disable (never search or stitch them)", permissions=["change"])
    def disable_action(self, request, queryset):
        changed = set_documents_enabled(documents=queryset, enabled=False)
        self.message_user(
            request,
            f"Disabled {count_of(changed, 'document')}: no search returns or stitches their "
            "paragraphs, and they stay disabled across rebuilds.",
            messages.SUCCESS,
        )

    def save_model(self, request, obj, form, change):
        # `enabled` is the one field of the row edited here, and it goes through the service.
        if "enabled" in form.changed_data:
            set_documents_enabled(documents=[obj], enabled=form.cleaned_data["enabled"])

    # -- deleting, through the service

    def get_deleted_objects(self, objs, request):
        # Counted, not listed row by row (a document can hold hundreds of paragraphs), and not refused
        # for lacking a permission on paragraphs, which are never deleted one at a time.
        summary = deletion_summary(documents=objs)
        return [str(o) for o in objs], {"paragraphs": summary["paragraphs"]}, set(), []

    def render_delete_form(self, request, context):
        document = context.get("object")
        if document is not None:
            context["paragraph_count"] = count_of(document.paragraphs.count(), "paragraph")
            context["from_folder"] = document.source == Document.FOLDER
        return super().render_delete_form(request, context)

    def delete_view(self, request, object_id, extra_context=None):
        if request.method == "POST" and request.POST.get("post"):
            document = get_object_or_404(Document, pk=object_id)
            require(self.has_delete_permission(request, document))
            try:
                delete_document(document=document, by=request.user.get_username())
            except RagsiteError as exc:
                self.message_user(
                    request,
                    f"Not deleted: {exc.message}. Delete the collection instead, or add "
                    "documents and rebuild first.",
                    messages.ERROR,
                )
                return HttpResponseRedirect(
                    reverse("admin:collections_app_document_change", args=[document.pk])
                )
            self.message_user(
                request,
                f"Deleted {document.name} and its paragraphs. The collection needs a rebuild "
                "to renumber what is left.",
                messages.SUCCESS,
            )
            return HttpResponseRedirect(
                reverse("admin:collections_app_collection_change", args=[document.collection_id])
            )
        return super().delete_view(request, object_id, extra_context)

    def approve_view(self, request, object_id):
        document = get_object_or_404(Document, pk=object_id)
        require(self.has_change_permission(request, document))
        for warning in approval_warnings([document]):
            self.message_user(request, warning, messages.WARNING)
        approved = approve_documents([document], by=request.user)
        if approved:
            self.message_user(
                request, f"{document.name} is approved and searched from now on.", messages.SUCCESS
            )
            self._build_unbuilt(request, approved)
        else:
            self.message_user(request, f"{document.name} was not waiting for review.", messages.WARNING)
        return HttpResponseRedirect(reverse("admin:collections_app_document_change", args=[document.pk]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        document = self.get_object(request, object_id)
        extra_context = dict(extra_context or {})
        if document is not None and waits_in_review(document):
            extra_context["approve_url"] = reverse(
                "admin:collections_app_document_approve", args=[document.pk]
            )
            extra_context["approve_warnings"] = approval_warnings([document])
        return super().change_view(request, object_id, form_url, extra_context)

    def changelist_view(self, request, extra_context=None):
        extra_context = {
            **(extra_context or {}),
            "upload_url": reverse("admin:collections_app_document_upload"),
        }
        return super().changelist_view(request, extra_context)

    def upload_view(self, request):
        """Upload files into a collection through `upload_document`; each file is accepted or refused on its
        own."""
        require(has_perm(request, "add", Document))
        if request.method == "POST":
            form = UploadForm(request.POST, request.FILES)
            if form.is_valid():
                collection = form.cleaned_data["collection"]
                if form.cleaned_data["rebuild"]:
                    require(has_perm(request, "change", Collection))
                outcome = upload_documents(collection=collection, files=form.cleaned_data["files"])
                for _name, reason in outcome.refused:
                    self.message_user(request, f"Refused: {reason}", messages.ERROR)
                stored = outcome.stored
                if stored:
                    self.message_user(
                        request,
                        f"Uploaded to {collection.name}: {', '.join(stored)}. The next build reads them.",
                        messages.SUCCESS,
                    )
                    if form.cleaned_data["rebuild"]:
                        run = request_build_or_say_why(self, request, collection)
                        if run is not None:
                            self.message_user(
                                request,
                                f"Build {run.number} of {collection.name} requested.",
                                messages.SUCCESS,
                            )
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


def waits_in_review(document: Document) -> bool:
    """Wholly (needs review) or for some paragraphs (`review_paragraphs`): either waits for an approval."""
    return document.status == Document.NEEDS_REVIEW or document.review_paragraphs
