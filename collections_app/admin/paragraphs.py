"""Paragraphs, labels and readers: bulk labelling through an intermediate page, neighbours on a paragraph."""

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import Count
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.http import urlencode

from ragsite.errors import RagsiteError

from ..models import (
    Document,
    Label,
    Paragraph,
    Reader,
)
from ..services.documents import set_paragraphs_enabled
from ..services.readers.labels import add_labels, labels_named, remove_labels, set_paragraph_labels
from .common import (
    SearchableListFilter,
    count_of,
    open_collections_notice,
    text_block,
)


class ReaderInline(admin.TabularInline):
    model = Reader.labels.through
    verbose_name = "reader holding this label"
    verbose_name_plural = "readers holding this label"
    extra = 0
    autocomplete_fields = ["reader"]


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ["name", "description", "paragraph_count", "reader_count", "document_count"]
    search_fields = ["name", "description"]
    inlines = [ReaderInline]
    readonly_fields = ["takes_effect"]
    delete_confirmation_template = "admin/collections_app/label/delete_confirmation.html"

    @admin.display(description="takes effect")
    def takes_effect(self, label):
        if label.pk is None:
            return "Labels take effect in collections where Per reader is on."
        return (
            open_collections_notice(Paragraph.objects.filter(labels=label))
            or "In every collection it is used in."
        )

    def _becomes_public(self, labels) -> int:
        """Paragraphs whose only labels are among `labels`: once deleted, any reader may read them."""
        ids = [label.pk for label in labels]
        return (
            Paragraph.objects.filter(labels__in=ids)
            .exclude(pk__in=Paragraph.labels.through.objects.exclude(label_id__in=ids).values("paragraph_id"))
            .distinct()
            .count()
        )

    def render_delete_form(self, request, context):
        label = context.get("object")
        context["becomes_public"] = self._becomes_public([label]) if label is not None else 0
        return super().render_delete_form(request, context)

    def get_deleted_objects(self, objs, request):
        # Said in words on the confirmation page, not as one row per paragraph-label link.
        _deleted, counts, perms, protected = super().get_deleted_objects(objs, request)
        return [f"the label {o}" for o in objs], counts, perms, protected

    def get_actions(self, request):
        # Deleting goes through the label's own page, which says what becomes public first.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(
                n_paragraphs=Count("paragraphs", distinct=True),
                n_readers=Count("readers", distinct=True),
                n_documents=Count("documents", distinct=True),
            )
        )

    @admin.display(description="paragraphs", ordering="n_paragraphs")
    def paragraph_count(self, label):
        url = (
            reverse("admin:collections_app_paragraph_changelist")
            + "?"
            + urlencode({"labels__id__exact": label.pk})
        )
        return format_html('<a href="{}">{}</a>', url, label.n_paragraphs)

    @admin.display(description="readers", ordering="n_readers")
    def reader_count(self, label):
        url = (
            reverse("admin:collections_app_reader_changelist")
            + "?"
            + urlencode({"labels__id__exact": label.pk})
        )
        return format_html('<a href="{}">{}</a>', url, label.n_readers)

    @admin.display(description="documents (default)", ordering="n_documents")
    def document_count(self, label):
        return label.n_documents


@admin.register(Reader)
class ReaderAdmin(admin.ModelAdmin):
    list_display = ["external_id", "labels_shown", "withdrawn_at"]
    readonly_fields = ["withdrawn_at"]
    list_filter = ["labels"]
    search_fields = ["external_id"]
    filter_horizontal = ["labels"]

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("labels")

    @admin.display(description="labels")
    def labels_shown(self, reader):
        return ", ".join(label.name for label in reader.labels.all()) or "—"


class UnlabelledFilter(admin.SimpleListFilter):
    title = "unlabelled"
    parameter_name = "unlabelled"

    def lookups(self, request, model_admin):
        return [("yes", "unlabelled (any reader may read)"), ("no", "labelled")]

    def queryset(self, request, queryset):
        if self.value() == "yes":
            return queryset.filter(labels__isnull=True)
        if self.value() == "no":
            return queryset.filter(labels__isnull=False).distinct()
        return queryset


class DocumentFilter(SearchableListFilter):
    """Documents of the chosen collection (of all collections when none is chosen), every one of them."""

    title = "document"
    parameter_name = "document"

    def lookups(self, request, model_admin):
        documents = Document.objects.order_by("collection__name", "name")
        collection = request.GET.get("collection__id__exact")
        if collection and collection.isdigit():
            return [
                (str(pk), name)
                for pk, name in documents.filter(collection_id=int(collection)).values_list("pk", "name")
            ]
        return [
            (str(pk), f"{c}/{name}")
            for pk, c, name in documents.values_list("pk", "collection__name", "name")
        ]

    def queryset(self, request, queryset):
        value = self.value()
        if value and value.isdigit():
            return queryset.filter(document_id=int(value))
        return queryset


class SectionFilter(SearchableListFilter):
    """Section headings of the chosen document or collection."""

    title = "section"
    parameter_name = "section"

    def lookups(self, request, model_admin):
        paragraphs = Paragraph.objects.all()
        document, collection = request.GET.get("document"), request.GET.get("collection__id__exact")
        if document and document.isdigit():
            paragraphs = paragraphs.filter(document_id=int(document))
        elif collection and collection.isdigit():
            paragraphs = paragraphs.filter(collection_id=int(collection))
        sections = (
            paragraphs.exclude(section="").order_by("section").values_list("section", flat=True).distinct()
        )
        return [(s, s[:80]) for s in sections]

    def queryset(self, request, queryset):
        if self.value():
            return queryset.filter(section=self.value())
        return queryset


class LabelChoiceForm(forms.Form):
    """The intermediate page of "Add labels…" / "Remove labels…"."""

    labels = forms.ModelMultipleChoiceField(
        queryset=Label.objects.all(), required=False, widget=forms.CheckboxSelectMultiple
    )
    new_labels = forms.CharField(
        required=False,
        max_length=1000,
        label="New labels",
        help_text="Comma-separated names of labels to create and add (letters, digits, '-', '_').",
    )

    def __init__(self, *args, mode: str, labels_queryset=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.mode = mode
        if labels_queryset is not None:
            self.fields["labels"].queryset = labels_queryset
        if mode != "add":
            del self.fields["new_labels"]

    def chosen(self) -> list[Label]:
        chosen = list(self.cleaned_data["labels"])
        if self.mode == "add" and self.cleaned_data.get("new_labels"):
            try:
                names = [n.strip() for n in self.cleaned_data["new_labels"].split(",")]
                chosen += [label for label in labels_named(names, create=True) if label not in chosen]
            except RagsiteError as exc:
                self.add_error("new_labels", exc.message)
                return []
        if not chosen:
            self.add_error(None, "Choose at least one label.")
        return chosen


class EnabledFilter(admin.SimpleListFilter):
    title = "in search"
    parameter_name = "enabled"

    def lookups(self, request, model_admin):
        return [("yes", "enabled"), ("no", "disabled")]

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            return queryset.filter(enabled=self.value() == "yes")
        return queryset


class ParagraphLabelsForm(forms.ModelForm):
    class Meta:
        model = Paragraph
        fields = ["enabled", "labels"]
        labels = {"enabled": "Enabled (searched)"}


@admin.register(Paragraph)
class ParagraphAdmin(admin.ModelAdmin):
    form = ParagraphLabelsForm
    list_display = ["citation", "excerpt", "labels_shown", "section", "collection"]
    list_filter = ["collection", DocumentFilter, SectionFilter, "labels", UnlabelledFilter, EnabledFilter]
    search_fields = ["text"]
    list_select_related = ["document", "collection__agent"]
    list_per_page = 50
    actions = ["add_labels_action", "remove_labels_action", "enable_action", "disable_action"]
    fieldsets = [
        (
            "Where",
            {"fields": ["collection", "document_link", "citation", "section", "pages_shown", "position"]},
        ),
        ("Text, with its neighbours", {"fields": ["previous_paragraph", "text_shown", "next_paragraph"]}),
        ("In search", {"fields": ["enabled"]}),
        ("Who may read it", {"fields": ["takes_effect", "labels"]}),
    ]
    readonly_fields = [
        "collection",
        "document_link",
        "citation",
        "section",
        "pages_shown",
        "position",
        "previous_paragraph",
        "text_shown",
        "next_paragraph",
        "takes_effect",
    ]
    filter_horizontal = ["labels"]

    def get_queryset(self, request):
        return super().get_queryset(request).defer("embedding").prefetch_related("labels")

    def get_list_display(self, request):
        # With one collection chosen, its name on every row is noise; the room goes to the text.
        shown = list(super().get_list_display(request))
        if request.GET.get("collection__id__exact"):
            shown.remove("collection")
        return shown

    def has_add_permission(self, request):
        return False  # paragraphs are made by builds

    def has_delete_permission(self, request, obj=None):
        return False  # ...and removed by them, never one at a time

    @admin.display(description="chunk id", ordering="ordinal")
    def citation(self, paragraph):
        if not paragraph.enabled:
            return format_html(
                '<s class="rs-disabled" title="disabled: never searched">{}</s>', paragraph.chunk_id
            )
        return paragraph.chunk_id

    @admin.display(description="labels")
    def labels_shown(self, paragraph):
        names = [label.name for label in paragraph.labels.all()]
        if not names:
            return format_html('<span class="rs-refused-none">{}</span>', "unlabelled")
        return ", ".join(names)

    @admin.display(description="text")
    def excerpt(self, paragraph):
        text = " ".join(paragraph.text.split())
        text = text[:240] + ("…" if len(text) > 240 else "")
        if not paragraph.enabled:
            return format_html('<s class="rs-disabled">{}</s> <span class="rs-badge">disabled</span>', text)
        return text

    @admin.display(description="takes effect")
    def takes_effect(self, paragraph):
        return open_collections_notice(Paragraph.objects.filter(pk=paragraph.pk)) or (
            "This collection answers per reader: a reader holding any of these labels may read this "
            "paragraph; with no label, any reader may."
        )

    @admin.display(description="document")
    def document_link(self, paragraph):
        url = reverse("admin:collections_app_document_change", args=[paragraph.document_id])
        state = paragraph.document.get_status_display() + ("" if paragraph.document.enabled else ", disabled")
        return format_html('<a href="{}">{}</a> ({})', url, paragraph.document.name, state)

    @admin.display(description="page")
    def pages_shown(self, paragraph):
        # What a person opens the document at to check a citation (PDF page, slide, sheet).
        first, last = paragraph.page_first, paragraph.page_last
        if first is None:
            return "—"
        return f"page {first}" if first == last else f"pages {first}–{last}"

    @admin.display(description="position")
    def position(self, paragraph):
        # One number everywhere: the chunk id's k, counted within the document from 0 (seed 004).
        return (
            f"k = {paragraph.index} within its document (counted from 0), the number after # in its chunk "
            f"id; characters {paragraph.start_char}–{paragraph.end_char}; "
            f"{count_of(paragraph.token_count or 0, 'token')}"
        )

    @admin.display(description="text")
    def text_shown(self, paragraph):
        return text_block(paragraph.text, "rs-current")

    def _neighbour(self, paragraph, step: int, edge: str):
        other = Paragraph.objects.filter(
            document_id=paragraph.document_id, index=paragraph.index + step
        ).first()
        if other is None:
            return format_html('<span class="rs-refused-none">{}</span>', edge)
        url = reverse("admin:collections_app_paragraph_change", args=[other.pk])
        return format_html(
            '<a href="{}">{}#{}</a>{}',
            url,
            paragraph.document.name,
            other.index,
            text_block(other.text, "rs-neighbour"),
        )

    @admin.display(description="previous")
    def previous_paragraph(self, paragraph):
        return self._neighbour(paragraph, -1, "the start of the document")

    @admin.display(description="next")
    def next_paragraph(self, paragraph):
        return self._neighbour(paragraph, +1, "the end of the document")

    def save_related(self, request, form, formsets, change):
        labels = form.cleaned_data.pop("labels", None)
        super().save_related(request, form, formsets, change)
        if labels is not None:
            set_paragraph_labels(paragraph=form.instance, labels=labels)

    def save_model(self, request, obj, form, change):
        # The only field saved here is `enabled`, and it goes through the service like the bulk action.
        if "enabled" in form.changed_data:
            set_paragraphs_enabled(paragraphs=[obj], enabled=form.cleaned_data["enabled"])

    # -- enable / disable

    @admin.action(description="Enable (search them again)", permissions=["change"])
    def enable_action(self, request, queryset):
        changed = set_paragraphs_enabled(paragraphs=queryset, enabled=True)
        self.message_user(
            request, f"Enabled {count_of(changed, 'paragraph')}; they are searched again.", messages.SUCCESS
        )

    @admin.action(description="Disable (never search or stitch them)", permissions=["change"])
    def disable_action(self, request, queryset):
        changed = set_paragraphs_enabled(paragraphs=queryset, enabled=False)
        self.message_user(
            request,
            f"Disabled {count_of(changed, 'paragraph')}; no search returns or stitches "
            "them, and they stay disabled across rebuilds.",
            messages.SUCCESS,
        )

    # -- bulk labelling through an intermediate page

    @admin.action(description="Add labels…", permissions=["change"])
    def add_labels_action(self, request, queryset):
        return self._label_action(request, queryset, "add")

    @admin.action(description="Remove labels…", permissions=["change"])
    def remove_labels_action(self, request, queryset):
        return self._label_action(request, queryset, "remove")

    def _label_action(self, request, queryset, mode: str):
        held = None
        if mode == "remove":
            held = Label.objects.filter(paragraphs__in=queryset).distinct()
        applying = "apply" in request.POST
        form = LabelChoiceForm(request.POST if applying else None, mode=mode, labels_queryset=held)
        if applying and form.is_valid():
            labels = form.chosen()
            if labels:
                names = ", ".join(label.name for label in labels)
                if mode == "add":
                    changed = add_labels(queryset, labels)
                    text = (
                        f"Added {names} to {count_of(queryset.count(), 'paragraph')} "
                        f"({count_of(changed, 'new label')} given)."
                    )
                else:
                    changed = remove_labels(queryset, labels)
                    text = f"Removed {names}: {count_of(changed, 'paragraph label')} taken off."
                self.message_user(request, text, messages.SUCCESS)
                return None  # back to the changelist, filters kept
        select_across = request.POST.get("select_across") == "1"
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Add labels to paragraphs" if mode == "add" else "Remove labels from paragraphs",
            "mode": mode,
            "form": form,
            "action": f"{mode}_labels_action",
            "count": queryset.count(),
            "sample": list(queryset.select_related("document")[:10]),
            "select_across": select_across,
            # Re-posted even with "select all": Django's changelist runs an action only when at least one
            # row id comes with it, and then `select_across` widens it to every row the filters match.
            "selected": request.POST.getlist(ACTION_CHECKBOX_NAME),
            "open_notice": open_collections_notice(queryset),
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "form_url": request.get_full_path(),
        }
        return TemplateResponse(request, "admin/collections_app/paragraph/label_action.html", context)
