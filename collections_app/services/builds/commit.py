"""The one short transaction that swaps a collection's paragraphs and records the build."""

import logging
from collections import defaultdict

from django.db import transaction
from django.db.models import Case, Q, Value, When
from django.utils import timezone

from ...models import (
    Agent,
    BuildRun,
    Collection,
    CollectionBuilt,
    Document,
    Paragraph,
)
from .. import indexes, webhooks
from ..leases import check_lease
from . import kept_labels, source_labels
from .prepare import built_version
from .review import _review_warnings, waiting
from .swap import approved, replace_paragraphs

logger = logging.getLogger("ragsite.builds")


def _commit(collection, run, prepared, existing, embedder, refused, previous) -> None:
    """The one short transaction: documents, paragraphs, labels, the build record.

    Only what changed is written: an unchanged folder costs a handful of queries
    and the build record, however many documents it holds.
    """
    agent: Agent = collection.agent
    now = timezone.now()
    size, overlap = collection.chunk_sizes()
    with transaction.atomic():
        check_lease(collection, run)
        was_searchable = Paragraph.objects.searchable(collection).exists()
        names = {p.name for p in prepared}
        # Documents gone from the source go, with their paragraphs. Uploads are
        # listed among the sources, so they never vanish here.
        gone = [document for name, document in existing.items() if name not in names]
        if gone:
            # Their labels wait for their return (builds.kept_labels), then they go in this same swap.
            kept_labels.keep(collection=collection, documents=gone)
            Document.objects.filter(pk__in=[document.pk for document in gone]).delete()
        returning = kept_labels.kept_for(collection) if any(not p.reused for p in prepared) else {}
        stored: dict[int, list[tuple[int, int]]] = defaultdict(list)
        for pk, document_id, ordinal in (
            Paragraph.objects.filter(collection=collection)
            .order_by("document_id", "index")
            .values_list("pk", "document_id", "ordinal")
        ):
            stored[document_id].append((pk, ordinal))
        renumbered: list[Paragraph] = []
        passages = ordinal = newly_in_review = 0
        for item in prepared:
            if not item.stored:
                continue
            document = existing.get(item.name) or Document(
                collection=collection, name=item.name, source=item.kind
            )
            before = _document_state(document)
            # A person approved this very version: it stays searchable.
            was_approved = approved(item, existing)
            whole_review = item.status == Document.NEEDS_REVIEW
            document.status = Document.ACTIVE if whole_review and was_approved else item.status
            was_reviewing = document.pk is not None and (
                before[BUILD_FIELDS.index("status")] == Document.NEEDS_REVIEW
                or before[BUILD_FIELDS.index("review_paragraphs")]
            )
            document.review_paragraphs = bool(item.held) and document.status == Document.ACTIVE
            document.fingerprint, document.summary = item.fingerprint, item.summary
            document.source_token = item.source_token
            document.source_readers, document.source_labels = item.source_readers, item.source_labels
            document.scan_warnings, document.conflicts = item.warnings, item.conflicts
            document.read_notes = item.read_notes
            document.refusal, document.attributes = item.refusal, item.attributes
            document.ocr_pages = document.ocr_pages if item.reused else item.ocr_pages
            if item.status == Document.REFUSED:
                document.paragraph_count, document.built_method, document.built_model = 0, "", ""
                if document.pk and stored.get(document.pk):
                    Paragraph.objects.filter(document=document).delete()
            elif item.reused:
                for pk, old in stored.get(document.pk, []):
                    if old != ordinal:
                        renumbered.append(Paragraph(pk=pk, ordinal=ordinal))
                    ordinal += 1
                document.paragraph_count = len(stored.get(document.pk, []))
            else:
                document.built_method, document.built_model = collection.method, embedder.model
                document.built_size, document.built_overlap, document.built_context = (
                    size,
                    overlap,
                    built_version(collection),
                )
                document.paragraph_count = len(item.pieces)
            if document.pk is None:
                document.updated_at = now
                document.save()
            elif _document_state(document) != before:
                # Only the fields a build owns: an approval or label edit made while the
                # build ran is not overwritten with what was read at its start.
                document.updated_at = now
                document.save(update_fields=[*BUILD_FIELDS, "updated_at"])
            if item.status != Document.REFUSED and not item.reused:
                kept = returning.pop(item.name, None)
                if kept is not None:
                    kept_labels.restore_defaults(document=document, kept=kept)
                    kept.delete()
                ordinal = replace_paragraphs(
                    document=document,
                    item=item,
                    agent=agent,
                    ordinal=ordinal,
                    run=run,
                    kept=kept_labels.paragraph_labels(kept) if kept else None,
                )
            if item.status != Document.REFUSED and (
                not item.reused or before[BUILD_FIELDS.index("source_labels")] != item.source_labels
            ):
                # New paragraphs take their source's labels; reused ones follow a change of them alone.
                if source_labels.apply(document=document, labels=item.source_labels) and item.reused:
                    run.documents_relabelled += 1
            had_held = before[BUILD_FIELDS.index("review_paragraphs")]
            if item.status != Document.REFUSED and (item.held or had_held):
                _hold_for_review(document, item.held)
            if not was_reviewing and (document.status == Document.NEEDS_REVIEW or item.held):
                newly_in_review += 1
            passages += document.paragraph_count
        if renumbered:
            Paragraph.objects.bulk_update(renumbered, ["ordinal"], batch_size=500)
        Paragraph.objects.guard_not_empty(collection, was_searchable=was_searchable)
        if collection.per_reader:
            unlabelled = Paragraph.objects.filter(collection=collection, labels__isnull=True).count()
            if unlabelled:
                run.warnings.append(f"{unlabelled} paragraphs have no label, so any reader may read them")
        unmapped = source_labels.unmapped_warning(prepared)
        if unmapped:
            run.warnings.append(unmapped)
        in_review = waiting(prepared, existing)
        run.warnings += _review_warnings(in_review)
        run.documents_in_review = len(in_review)
        if not Paragraph.objects.searchable(collection).exists():
            # Seed 000: a build that leaves nothing to answer from is refused. Only a collection that
            # answered nothing before gets here (else _build refused earlier); its documents are kept,
            # held for review, so a person can approve them, but it is not built: searches answer
            # "never built" rather than an empty list.
            _refuse_all_in_review(collection, run, prepared, now)
            return
        CollectionBuilt.objects.update_or_create(
            collection=collection,
            defaults=dict(
                agent_id=agent.agent_id,
                model=embedder.model,
                dimensions=embedder.dimensions,
                method=collection.method,
                # As check_lease read it from the locked row, not when the build started: a change made
                # while it ran is the one it indexes with (the paragraphs do not depend on it).
                analyzer=collection.analyzer,
                built_from=collection.built_from,
                passages=passages,
                built_at=now,
                refused=refused,
                index_id="",  # built here: the IVF seeds from the collection's name
            ),
        )
        Collection.objects.filter(pk=collection.pk).exclude(rebuild_needed="").update(rebuild_needed="")
        run.passages = passages
        run.documents_done = run.documents_total
        run.paragraphs_done = run.paragraphs_total
        # The index is written and read back before the swap commits: a full disk fails the build here,
        # rolling it back, and the previous build keeps answering.
        key = indexes.index_before_commit(collection=collection)
        # Live, but not all of it: what waits in review is said in the status, never a plain success.
        status = BuildRun.SUCCEEDED_WITH_REVIEW if in_review else BuildRun.SUCCEEDED
        run.status, run.finished_at, run.heartbeat_at = status, now, now
        run.save()
        if newly_in_review:
            webhooks.documents_need_review(run=run, documents=newly_in_review)
    indexes.after_commit(collection=collection, key=key)
    logger.info(
        "build %s of %s/%s: %s paragraphs, %s documents read, %s reused, %s refused, %s embedded",
        run.pk,
        agent.agent_id,
        collection.name,
        passages,
        run.documents_read,
        run.documents_reused,
        len(refused),
        run.paragraphs_embedded,
    )


def _refuse_all_in_review(collection, run, prepared, now) -> None:
    """Inside the commit: keep the documents and rows for review, unbuild the collection, refuse the run."""
    CollectionBuilt.objects.filter(collection=collection).delete()
    held = ", ".join(item.name for item in prepared if item.status == Document.NEEDS_REVIEW or item.held)
    run.error = (
        f'the build of "{collection.name}" would leave nothing readers could search: every document '
        f"needs review ({held}); approve them in the admin, then build again"
    )[:2000]
    run.status, run.finished_at, run.heartbeat_at = BuildRun.REFUSED, now, now
    run.save()
    logger.warning(
        "build %s of %s/%s refused: every document needs review",
        run.pk,
        collection.agent.agent_id,
        collection.name,
    )


BUILD_FIELDS = (
    "fingerprint",
    "status",
    "review_paragraphs",
    "refusal",
    "summary",
    "scan_warnings",
    "read_notes",
    "conflicts",
    "paragraph_count",
    "attributes",
    "built_method",
    "built_size",
    "built_overlap",
    "built_model",
    "built_context",
    "ocr_pages",
    "source_token",
    "source_readers",
    "source_labels",
)


def _hold_for_review(document: Document, held: list[int]) -> None:
    """Mark the document's paragraphs ``held`` (by k) as waiting in review, and only those: one statement,
    which writes only the rows whose mark changes (none at an unchanged rebuild)."""
    rows = Paragraph.objects.filter(document=document)
    if not held:
        rows.filter(in_review=True).update(in_review=False)
        return
    wanted = Q(index__in=held)
    rows.filter((Q(in_review=True) & ~wanted) | (Q(in_review=False) & wanted)).update(
        in_review=Case(When(wanted, then=Value(True)), default=Value(False))
    )


def _document_state(document: Document) -> tuple:
    return tuple(getattr(document, name) for name in BUILD_FIELDS)
