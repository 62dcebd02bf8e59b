"""Taking documents and paragraphs out of search, and deleting documents and collections.

Disabling is the reversible way to keep something out of answers: a disabled paragraph
or document is never searched or stitched, and the mark survives rebuilds (a document
keeps its row; a paragraph's mark follows its text fingerprint, as labels do).

Deleting is for superusers in the admin. A deleted document's paragraphs go with it at
once and the collection is marked as needing a rebuild. The empty-store rule holds here
too: deleting the last document that still has paragraphs out of a built collection is
refused by the store's own guard, exactly as a build that would empty it is, so a built
collection never answers from an empty index. Delete the collection instead.
"""

import logging
from collections.abc import Iterable

from django.db import transaction
from django.db.models import Count, Q, QuerySet

from ..models import Collection, CollectionBuilt, Document, MeasureRun, Paragraph
from .known_answers import measure_again
from .origins import forget_copies
from .search import forget_index

logger = logging.getLogger("ragsite.documents")

BATCH = 500  # ids per query: well under every backend's limit on query parameters


def _ids(objects) -> list[int]:
    if isinstance(objects, QuerySet):
        return list(objects.values_list("pk", flat=True))  # never loads texts or embeddings
    return [o.pk if hasattr(o, "pk") else int(o) for o in objects]


def set_paragraphs_enabled(*, paragraphs: Iterable[Paragraph], enabled: bool) -> int:
    """Enable or disable paragraphs; returns how many changed. Takes effect at the next search."""
    ids = _ids(paragraphs)
    changed = 0
    touched: set[int] = set()
    with transaction.atomic():
        for start in range(0, len(ids), BATCH):
            batch = Paragraph.objects.filter(pk__in=ids[start : start + BATCH]).exclude(enabled=enabled)
            touched.update(batch.values_list("collection_id", flat=True).distinct())
            changed += batch.update(enabled=enabled)
        # Known answers are measured over what search reads, which this changed: they are asked again.
        measure_again(collection_ids=touched)
    return changed


def set_documents_enabled(*, documents: Iterable[Document], enabled: bool) -> int:
    """Enable or disable whole documents; returns how many changed. Their paragraphs keep their own marks."""
    ids = _ids(documents)
    changed = 0
    touched: set[int] = set()
    with transaction.atomic():
        for start in range(0, len(ids), BATCH):
            batch = Document.objects.filter(pk__in=ids[start : start + BATCH]).exclude(enabled=enabled)
            touched.update(batch.values_list("collection_id", flat=True).distinct())
            changed += batch.update(enabled=enabled)
        # Known answers are measured over what search reads, which this changed: they are asked again.
        measure_again(collection_ids=touched)
    return changed


def searchable_paragraphs(collection: Collection) -> int:
    """Paragraphs a search can reach before reader labels: enabled, of an active and enabled document."""
    return Paragraph.objects.filter(
        collection=collection,
        enabled=True,
        in_review=False,
        document__enabled=True,
        document__status=Document.ACTIVE,
    ).count()


def deletion_summary(*, collections: Iterable[Collection] = (), documents: Iterable[Document] = ()) -> dict:
    """What a deletion takes with it, counted (never listed row by row): for the confirmation page."""
    collection_ids, document_ids = _ids(collections), _ids(documents)
    docs = Document.objects.filter(collection_id__in=collection_ids) | Document.objects.filter(
        pk__in=document_ids
    )
    paragraphs = Paragraph.objects.filter(collection_id__in=collection_ids) | Paragraph.objects.filter(
        document_id__in=document_ids
    )
    return {
        "collections": len(collection_ids),
        "documents": docs.distinct().count(),
        "uploads": docs.distinct().filter(source=Document.UPLOAD).exclude(upload="").count(),
        "paragraphs": paragraphs.distinct().count(),
        "measure_runs": MeasureRun.objects.filter(collection_id__in=collection_ids).count(),
    }


def delete_document(*, document: Document, by: str = "") -> None:
    """Delete one document and its paragraphs; the collection is marked as needing a rebuild.

    Raises `EmptyBuild` (409) when the collection is built and this document holds its last
    paragraphs: the store's guard refuses, and nothing is deleted.
    """
    collection = document.collection
    upload = document.upload.name if document.upload else ""
    storage = document.upload.storage
    with transaction.atomic():
        Collection.objects.select_for_update().filter(pk=collection.pk).first()
        name = document.name
        # As a build: a collection that answered must still answer; one whose every document waits
        # for review may lose one of them.
        was_searchable = Paragraph.objects.searchable(collection).exists()
        document.delete()
        built = CollectionBuilt.objects.filter(collection=collection).first()
        if built is not None:
            Paragraph.objects.guard_not_empty(collection, was_searchable=was_searchable)
            # Lowering the count is what tells every process's search cache the rows changed.
            built.passages = Paragraph.objects.filter(collection=collection).count()
            built.save(update_fields=["passages"])
        collection.rebuild_needed = f"{name} was deleted; rebuild to renumber the paragraphs"[:300]
        collection.save(update_fields=["rebuild_needed"])
    forget_index(collection.pk)
    if upload:
        # After the commit: a refused delete must not lose the file.
        storage.delete(upload)
    logger.info("document %s deleted from collection %s by %s", name, collection.pk, by or "?")


def delete_collection(*, collection: Collection, by: str = "") -> None:
    """Delete a collection with its documents, paragraphs, build history, measure runs, uploaded files and
    this node's copy of its remote source."""
    uploads = [
        (d.upload.storage, d.upload.name)
        for d in collection.documents.filter(source=Document.UPLOAD).exclude(upload="")
    ]
    pk, name = collection.pk, collection.name
    with transaction.atomic():
        # Paragraphs first, in one statement: the cascade would otherwise collect them row by row.
        Paragraph.objects.filter(collection=collection).delete()
        collection.delete()
    forget_index(pk)
    forget_copies(pk)
    for storage, path in uploads:
        storage.delete(path)
    logger.info("collection %s (%s) deleted by %s", name, pk, by or "?")


def collection_health(collection: Collection) -> dict:
    """What a librarian must know before trusting a collection: paragraphs stored and searchable, and
    the reasons it cannot answer (never built, nothing searchable, a model this server cannot search),
    and apart from those (`pending`) why it needs a rebuild while it still answers from its last build."""
    from ragsite import embedding

    counts = Paragraph.objects.filter(collection=collection).aggregate(
        stored=Count("id"),
        disabled=Count("id", filter=Q(enabled=False) | Q(document__enabled=False)),
        held_back=Count("id", filter=~Q(document__status=Document.ACTIVE) | Q(in_review=True)),
    )
    searchable = searchable_paragraphs(collection)
    problems: list[str] = []
    built = CollectionBuilt.objects.filter(collection=collection).first()
    if built is None:
        problems.append("never built: nothing can be searched yet")
    else:
        if searchable == 0:
            problems.append(
                "no searchable paragraph: every one is disabled or in a document waiting for review"
            )
        try:
            model = embedding.get_embedder().model
        except Exception as exc:  # a misconfigured embedder is itself the news
            logger.warning("the configured embedder could not be built: %s", type(exc).__name__)
            model = None
        if built.dimensions and model is not None and model != built.model:
            problems.append(
                f"built with {built.model} but this server embeds with {model}: every search is refused "
                "until it is rebuilt"
            )
    # A note such as "per reader was switched" is not a failure: searches go on answering meanwhile.
    pending = [collection.rebuild_needed] if collection.rebuild_needed else []
    return {**counts, "searchable": searchable, "problems": problems, "pending": pending}
