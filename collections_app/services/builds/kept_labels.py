"""Labels of documents that leave their source, kept for their return.

A build swaps out a document that is gone from its folder, and with it its paragraphs and their
labels. People labelled those paragraphs by hand, and a file moved away and back (a sync that saw a
rename half done, a folder restored from backup) should not cost them that work. So the swap that
removes a document first writes its labels here by name: the paragraph labels by the text
fingerprint, as a rebuild carries them (services.builds), and the document's default labels. The
build that brings a document of that name back applies them to its new paragraphs and deletes the
row. Both happen inside the build's one transaction.
"""

from collections import defaultdict
from collections.abc import Iterable

from django.utils import timezone

from ...models import Collection, Document, KeptLabels, Label, Paragraph, SourceLabel

BATCH = 500  # ids per IN list, well under SQLite's variable limit


def keep(*, collection: Collection, documents: Iterable[Document]) -> int:
    """Before `documents` are deleted: remember their labels by name; returns how many had some."""
    documents = list(documents)
    paragraph_labels: dict[int, dict[str, set[int]]] = defaultdict(lambda: defaultdict(set))
    default_labels: dict[int, set[int]] = defaultdict(set)
    through = Paragraph.labels.through
    defaults_through = Document.default_labels.through
    for start in range(0, len(documents), BATCH):
        ids = [document.pk for document in documents[start : start + BATCH]]
        # Only the labels people set: those its source gave come back from the source, if it still does.
        given = {
            (paragraph_id, label_id)
            for paragraph_id, label_id in SourceLabel.objects.filter(
                paragraph__document_id__in=ids
            ).values_list("paragraph_id", "label_id")
        }
        for paragraph_id, document_id, fingerprint, label_id in through.objects.filter(
            paragraph__document_id__in=ids
        ).values_list("paragraph_id", "paragraph__document_id", "paragraph__fingerprint", "label_id"):
            if (paragraph_id, label_id) not in given:
                paragraph_labels[document_id][fingerprint].add(label_id)
        for document_id, label_id in defaults_through.objects.filter(document_id__in=ids).values_list(
            "document_id", "label_id"
        ):
            default_labels[document_id].add(label_id)
    kept = 0
    now = timezone.now()
    for document in documents:
        labels = {fp: sorted(ids) for fp, ids in paragraph_labels[document.pk].items()}
        defaults = sorted(default_labels[document.pk])
        if labels or defaults:
            KeptLabels.objects.update_or_create(
                collection=collection,
                name=document.name,
                defaults={"paragraph_labels": labels, "default_labels": defaults, "kept_at": now},
            )
            kept += 1
    return kept


def kept_for(collection: Collection) -> dict[str, KeptLabels]:
    """The collection's kept labels by document name (few rows: only documents that left with labels)."""
    return {kept.name: kept for kept in KeptLabels.objects.filter(collection=collection)}


def restore_defaults(*, document: Document, kept: KeptLabels) -> None:
    """Give a returning document back its default labels (those that still exist)."""
    existing = set(Label.objects.filter(pk__in=kept.default_labels).values_list("pk", flat=True))
    if existing:
        document.default_labels.add(*existing)


def paragraph_labels(kept: KeptLabels) -> dict[str, set[int]]:
    """{text fingerprint: label ids} of a returning document, for the build to merge with its own."""
    existing = set(
        Label.objects.filter(pk__in={i for ids in kept.paragraph_labels.values() for i in ids}).values_list(
            "pk", flat=True
        )
    )
    return {fp: set(ids) & existing for fp, ids in kept.paragraph_labels.items()}
