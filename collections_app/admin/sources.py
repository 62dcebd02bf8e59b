"""Collection sources in the admin: staff choose where a collection's documents come from (a folder, a
git repository, an S3 bucket, a WebDAV share, a website) with its settings, and give credentials that
are sealed at rest and never shown again (the field is always empty on the page; left empty, those set
are kept).
Saving goes through `services.origins.set_source`; nothing is built until the next build or sync check.
"""

import json

from django import forms
from django.contrib import admin
from django.utils.html import format_html, format_html_join

from ..models import CollectionSource, Document, Label
from ..services import origins
from ..services.origins.readers import UNMAPPED_LABEL


def _json_object(text: str, what: str) -> dict | None:
    if not text.strip():
        return None
    try:
        value = json.loads(text)
    except ValueError:
        raise forms.ValidationError(f"{what} must be a JSON object") from None
    if not isinstance(value, dict):
        raise forms.ValidationError(f"{what} must be a JSON object")
    return value


class CollectionSourceForm(forms.ModelForm):
    settings_json = forms.CharField(
        label="settings",
        required=False,
        widget=forms.Textarea(attrs={"rows": 4, "cols": 80}),
        help_text='A JSON object, per kind (docs/sources.md): git {"url", "branch", "path"}; s3 '
        '{"endpoint_url", "bucket", "prefix", "region"}; webdav {"url", "path"}; web {"start_url", '
        '"sitemap_url", "include", "exclude", "max_pages", "max_depth"}. A folder takes none.',
    )
    credentials_json = forms.CharField(
        label="credentials",
        required=False,
        widget=forms.PasswordInput(render_value=False, attrs={"size": 80, "autocomplete": "off"}),
        help_text='A JSON object: git {"username", "password"} or {"token"}; s3 {"access_key_id", '
        '"secret_access_key"}; webdav {"username", "password"} or {"token"}. Never shown again; left empty, '
        "the credentials already set are kept.",
    )
    clear_credentials = forms.BooleanField(required=False, help_text="Remove the credentials set.")

    class Meta:
        model = CollectionSource
        fields = ["collection", "kind"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.instance.pk:
            self.fields["settings_json"].initial = json.dumps(self.instance.settings, indent=1)

    def clean(self):
        cleaned = super().clean()
        settings = _json_object(cleaned.get("settings_json", ""), "settings")
        credentials = _json_object(cleaned.get("credentials_json", ""), "credentials")
        if cleaned.get("clear_credentials"):
            credentials = {}
        try:
            origins.checked_source(kind=cleaned.get("kind", ""), settings=settings, credentials=credentials)
        except origins.InvalidSource as exc:
            raise forms.ValidationError(exc.message) from None
        cleaned["settings"], cleaned["credentials"] = settings, credentials
        return cleaned


@admin.register(CollectionSource)
class CollectionSourceAdmin(admin.ModelAdmin):
    form = CollectionSourceForm
    list_display = ["collection", "kind", "described", "credentials_set"]
    list_filter = ["kind"]
    list_select_related = ["collection__agent"]

    def get_fields(self, request, obj=None):
        return ["collection", "kind", "settings_json", "credentials_json", "clear_credentials"]

    def get_readonly_fields(self, request, obj=None):
        return ["collection"] if obj is not None else []

    @admin.display(description="source")
    def described(self, source):
        return origins.summary(source.collection) or "the collection's folder"

    @admin.display(description="credentials", boolean=True)
    def credentials_set(self, source):
        return bool(source.credentials)

    def save_model(self, request, obj, form, change):
        # Through the service, which checks again and seals; the form's instance is not saved as it is.
        saved = origins.set_source(
            collection=obj.collection,
            kind=form.cleaned_data["kind"],
            settings=form.cleaned_data["settings"],
            credentials=form.cleaned_data["credentials"],
        )
        obj.pk, obj.credentials, obj.settings = saved.pk, saved.credentials, saved.settings


def source_readers_line(document) -> str:
    """A document's readers as its source gave them (group names) and the labels they became through the
    identity-provider groups (docs/sources.md, "Permissions"); a group nobody mapped is named as such."""
    if not document.source_readers:
        return "none: its source names no readers"
    labels = sorted(Label.objects.filter(pk__in=document.source_labels).values_list("name", flat=True))
    if labels == [UNMAPPED_LABEL]:
        return format_html(
            '<span data-role="source-readers">groups {} &rarr; no group is mapped to a label: held from '
            "every reader (label {}) until one is</span>",
            ", ".join(document.source_readers),
            UNMAPPED_LABEL,
        )
    return format_html(
        '<span data-role="source-readers">groups {} &rarr; labels {}</span>',
        ", ".join(document.source_readers),
        ", ".join(labels) or "none",
    )


class DocumentSourceShown:
    """The document page's and list's view of where a document came from: the collection's origin (not
    the model's folder/upload split, which calls every document not uploaded "folder"), the readers
    its source gave, and its attributes with where they are written."""

    @admin.display(description="source", ordering="source")
    def origin_shown(self, document):
        if document.source == Document.UPLOAD:
            return "upload"
        origin = getattr(document.collection, "origin", None)
        if origin is None or origin.kind not in origins.LABELS:
            return "folder"
        return origins.LABELS[origin.kind][0].removeprefix("the ")

    @admin.display(description="readers from its source")
    def source_readers_shown(self, document):
        return source_readers_line(document)

    @admin.display(description="attributes")
    def attributes_shown(self, document):
        """What searches filter on: read from `<name>.meta.json` at each build, so shown, not edited here."""
        if not document.attributes:
            origin = getattr(document.collection, "origin", None)
            if document.source == Document.FOLDER and origin is not None and origin.kind in origins.LABELS:
                return format_html(
                    '<span class="help">{}</span>', "none: a remote source's sidecars are not read"
                )
            return format_html(
                '<span class="help">none: write them in {}.meta.json beside the file</span>', document.name
            )
        rows = format_html_join("", "<tr><th>{}</th><td>{}</td></tr>", sorted(document.attributes.items()))
        return format_html('<table class="rs-attributes" data-role="attributes">{}</table>', rows)
