"""Documents: review and approval, default labels, uploads."""

from django import forms
from django.contrib import admin, messages
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from ragsite.errors import RagsiteError

from .. import conf
from ..extract import SUPPORTED_SUFFIXES
from ..models import (
    Collection,
    Document,
)
from ..services.labels import (
    set_default_labels,
)
from ..services.review import approve_documents
from ..services.uploads import upload_document
from .common import (
    has_perm,
    request_build_or_say_why,
    require,
    status_badge,
)


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("widget", MultipleFileInput())
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        single = super().clean
        if isinstance(data, list | tuple):
            return [single(d, initial) for d in data]
        return [single(data, initial)]


class UploadForm(forms.Form):
    collection = forms.ModelChoiceField(queryset=Collection.objects.select_related("agent"))
    files = MultipleFileField(help_text="PDF, Word, Markdown, text or HTML; read by the collection's next build.")
    rebuild = forms.BooleanField(required=False, label="Rebuild the collection afterwards")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["collection"].label_from_instance = lambda c: f"{c.agent.agent_id} / {c.name}"


class DocumentDefaultLabelsForm(forms.ModelForm):
    class Meta:
        model = Document
        fields = ["default_labels"]
        help_texts = {
            "default_labels": "Labels every paragraph of this document carries: a label added here is given to its "
            "paragraphs now, and one removed here is taken off them."
        }


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    form = DocumentDefaultLabelsForm
    list_display = ["name", "collection", "source", "status_shown", "paragraphs", "warnings_shown",
                    "conflicts_shown", "default_labels_shown"]
    list_filter = ["status", "collection", "source"]
    search_fields = ["name"]
    list_select_related = ["collection__agent"]
    actions = ["approve"]
    # `upload` is never a field here: its value is a storage path.
    fields = ["collection", "name", "source", "status_shown", "fingerprint", "approved_fingerprint",
              "paragraphs_link", "summary", "warnings_shown", "conflicts_shown", "default_labels", "updated_at"]
    readonly_fields = ["collection", "name", "source", "status_shown", "fingerprint", "approved_fingerprint",
                       "paragraphs_link", "summary", "warnings_shown", "conflicts_shown", "updated_at"]
    filter_horizontal = ["default_labels"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("default_labels")

    def has_add_permission(self, request):
        return False  # documents come from a folder or from the upload page

    @admin.display(description="status", ordering="status")
    def status_shown(self, document):
        return status_badge(document.get_status_display())

    @admin.display(description="paragraphs", ordering="paragraph_count")
    def paragraphs(self, document):
        return document.paragraph_count if document.fingerprint else "—"

    @admin.display(description="warnings")
    def warnings_shown(self, document):
        if not document.scan_warnings:
            return "—"
        return format_html('<ul class="rs-warnings">{}</ul>',
                           format_html_join("", "<li>{}</li>", ((w,) for w in document.scan_warnings)))

    @admin.display(description="conflicts")
    def conflicts_shown(self, document):
        if not document.conflicts:
            return "—"
        return format_html('<ul class="rs-warnings">{}</ul>',
                           format_html_join("", "<li>{}</li>", ((c,) for c in document.conflicts)))

    @admin.display(description="default labels")
    def default_labels_shown(self, document):
        return ", ".join(label.name for label in document.default_labels.all()) or "—"

    @admin.display(description="paragraphs")
    def paragraphs_link(self, document):
        url = reverse("admin:collections_app_paragraph_changelist") + "?" + urlencode({"document": document.pk})
        if not document.fingerprint:
            return "not built yet: the next build reads it"
        return format_html('<a href="{}">{} paragraphs</a>', url, document.paragraph_count)

    def save_related(self, request, form, formsets, change):
        # Default labels go through the service, which also applies them to the paragraphs.
        labels = form.cleaned_data.pop("default_labels", None)
        super().save_related(request, form, formsets, change)
        if labels is not None:
            added, removed = set_default_labels(document=form.instance, labels=labels)
            if added or removed:
                self.message_user(request, f"Paragraph labels: {added} added, {removed} removed.", messages.INFO)

    @admin.action(description="Approve selected documents (needs review → active)", permissions=["change"])
    def approve(self, request, queryset):
        approved = approve_documents(queryset, by=request.user)
        skipped = queryset.count() - len(approved)
        text = f"Approved {len(approved)} document(s): {', '.join(d.name for d in approved)}." if approved else \
            "No document was approved."
        if skipped:
            text += f" {skipped} were not waiting for review and were left alone."
        self.message_user(request, text, messages.SUCCESS if approved else messages.WARNING)

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("upload/", wrap(self.upload_view), name="collections_app_document_upload"),
            path("<path:object_id>/approve/", wrap(require_POST(self.approve_view)),
                 name="collections_app_document_approve"),
        ] + super().get_urls()

    def approve_view(self, request, object_id):
        document = get_object_or_404(Document, pk=object_id)
        require(self.has_change_permission(request, document))
        if approve_documents([document], by=request.user):
            self.message_user(request, f"{document.name} is approved and searched from now on.", messages.SUCCESS)
        else:
            self.message_user(request, f"{document.name} was not waiting for review.", messages.WARNING)
        return HttpResponseRedirect(reverse("admin:collections_app_document_change", args=[document.pk]))

    def change_view(self, request, object_id, form_url="", extra_context=None):
        document = self.get_object(request, object_id)
        extra_context = dict(extra_context or {})
        if document is not None and document.status == Document.NEEDS_REVIEW:
            extra_context["approve_url"] = reverse("admin:collections_app_document_approve", args=[document.pk])
        return super().change_view(request, object_id, form_url, extra_context)

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}), "upload_url": reverse("admin:collections_app_document_upload")}
        return super().changelist_view(request, extra_context)

    def upload_view(self, request):
        """Upload files into a collection through `upload_document`; each file is accepted or refused on its own."""
        require(has_perm(request, "add", Document))
        if request.method == "POST":
            form = UploadForm(request.POST, request.FILES)
            if form.is_valid():
                collection = form.cleaned_data["collection"]
                if form.cleaned_data["rebuild"]:
                    require(has_perm(request, "change", Collection))
                stored = []
                for upload in form.cleaned_data["files"]:
                    try:
                        stored.append(upload_document(collection=collection, name=upload.name, content=upload).name)
                    except RagsiteError as exc:
                        self.message_user(request, f"Refused: {exc.message}", messages.ERROR)
                if stored:
                    self.message_user(
                        request,
                        f"Uploaded to {collection.name}: {', '.join(stored)}. The next build reads them.",
                        messages.SUCCESS,
                    )
                    if form.cleaned_data["rebuild"]:
                        run = request_build_or_say_why(self, request, collection)
                        if run is not None:
                            self.message_user(request, f"Build {run.pk} of {collection.name} requested.", messages.SUCCESS)
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
