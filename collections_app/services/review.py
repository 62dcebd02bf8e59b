"""Review: a person approving documents that a build put in `needs_review`.

A document lands in review when its scan raised warnings or copies another document
(seed 003): then it is not searched until approved. A paragraph that contradicts another
document's (the same but for its numbers) waits on its own while the rest of its document
answers, and never one that was answering already (builds.review). Approval is of
one version: `approved_fingerprint` records which bytes were approved, so a
changed file goes back to review at its next build; who approved it and when
are kept beside it.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ..models import Collection, Document, Paragraph
from .builds.review import BLOCK_BREAK, NUMBER

logger = logging.getLogger("ragsite.review")


def approve_documents(documents: Iterable[Document], *, by=None) -> list[Document]:
    """Make the documents among `documents` that wait in review searched; returns those approved.

    A document waits wholly (needs review) or for some paragraphs (`review_paragraphs`: they conflict
    with another document). Approving it puts all of it in search. When its collection's `on_conflict`
    is `newer_replaces`, the paragraphs of the other, live documents it conflicts with are switched off
    in the same transaction: the approved version replaces them. Documents in any other state are left
    alone: an active one needs nothing, and a refused one could not be read, so there is nothing a
    person could approve.
    """
    from .documents import set_paragraphs_enabled

    ids = [d.pk for d in documents]
    who = by.get_username() if by is not None and hasattr(by, "get_username") else str(by or "")
    approved = []
    now = timezone.now()
    with transaction.atomic():
        waiting = Q(status=Document.NEEDS_REVIEW) | Q(review_paragraphs=True)
        for document in Document.objects.select_for_update().filter(waiting, pk__in=ids):
            if document.collection.on_conflict == Collection.NEWER_REPLACES:
                set_paragraphs_enabled(paragraphs=replaced_by(document), enabled=False)
            document.status, document.review_paragraphs = Document.ACTIVE, False
            document.approved_fingerprint = document.fingerprint
            document.approved_by, document.approved_at = who[:150], now
            document.save(
                update_fields=[
                    "status",
                    "review_paragraphs",
                    "approved_fingerprint",
                    "approved_by",
                    "approved_at",
                ]
            )
            Paragraph.objects.filter(document=document, in_review=True).update(in_review=False)
            approved.append(document)
    for document in approved:
        # The document's name and collection only: never its text, never a path.
        logger.info(
            "document %s in collection %s approved by %s", document.name, document.collection_id, who or "?"
        )
    return approved


def replaced_by(document: Document) -> list[int]:
    """The ids of the live paragraphs of other documents that `document`'s conflicting paragraphs contradict
    (the ones an approval under `newer_replaces` switches off)."""
    ids = []
    for other in conflicting_documents(document):
        if other.status != Document.ACTIVE:
            continue
        for pair in conflicting_paragraphs(document, other):
            if pair.theirs_paragraph is not None:
                ids.append(pair.theirs_paragraph)
    live = Paragraph.objects.filter(pk__in=ids, in_review=False, enabled=True)
    return list(live.values_list("pk", flat=True))


def build_unbuilt_after_approval(approved: Iterable[Document], *, requested_by: str = "") -> dict[str, str]:
    """Queue a build of each never-built collection among `approved`'s: {name: "" when queued, else why not}.

    A first build whose documents all needed review is refused (seed 000), so the collection has no
    build for an approval to go live in: the build the approval calls for is queued here.
    """
    from ragsite.errors import RagsiteError

    from .builds import request_build

    outcome = {}
    ids = {document.collection_id for document in approved}
    for collection in Collection.objects.filter(pk__in=ids, built__isnull=True).select_related("agent"):
        try:
            request_build(collection=collection, requested_by=requested_by or "approval")
            outcome[collection.name] = ""
        except RagsiteError as exc:
            outcome[collection.name] = exc.message
    return outcome


@dataclass
class ConflictingPair:
    """Two paragraphs, one in each document, that read the same except for their numbers."""

    other: Document
    mine: str
    theirs: str
    mine_paragraph: int | None = None  # the stored paragraph holding each side, to link to
    theirs_paragraph: int | None = None
    mine_chunk_id: str = ""
    theirs_chunk_id: str = ""
    theirs_in_review: bool = False  # the other side is held back too (neither was answering)


def conflicting_documents(document: Document) -> list[Document]:
    """The collection's other documents that `document`'s recorded conflicts name."""
    if not document.conflicts:
        return []
    said = " ".join(document.conflicts)
    others = document.collection.documents.exclude(pk=document.pk).only(
        "id", "name", "status", "review_paragraphs", "collection_id"
    )
    return [other for other in others if other.name in said]


def conflicting_paragraphs(document: Document, other: Document) -> list[ConflictingPair]:
    """The blocks of the two documents that match except for their numbers, side by side (the build's
    rule)."""

    def blocks(doc: Document) -> dict[str, tuple[str, int, str, bool]]:
        shapes: dict[str, tuple[str, int, str, bool]] = {}
        rows = (
            Paragraph.objects.filter(document=doc)
            .order_by("index")
            .values_list("pk", "index", "text", "in_review")
        )
        for pk, index, text, in_review in rows:
            for block in BLOCK_BREAK.split(text):
                block = " ".join(line for line in block.splitlines() if not line.lstrip().startswith("#"))
                flat = " ".join(block.split())
                if NUMBER.search(flat) and len(flat) >= 40:
                    shapes.setdefault(NUMBER.sub("#", flat), (flat, pk, f"{doc.name}#{index}", in_review))
        return shapes

    mine, theirs = blocks(document), blocks(other)
    return [
        ConflictingPair(
            other=other,
            mine=mine[shape][0],
            theirs=theirs[shape][0],
            mine_paragraph=mine[shape][1],
            theirs_paragraph=theirs[shape][1],
            mine_chunk_id=mine[shape][2],
            theirs_chunk_id=theirs[shape][2],
            theirs_in_review=theirs[shape][3],
        )
        for shape in mine
        if shape in theirs and mine[shape][0] != theirs[shape][0]
    ]


def approval_warnings(documents: Iterable[Document]) -> list[str]:
    """What approving `documents` would leave contradicting: their conflicting partners already active
    or about to be approved together. Said before the approval, so a person can choose one."""
    chosen = {d.pk for d in documents}
    warnings = []
    for document in documents:
        for other in conflicting_documents(document):
            if other.pk in chosen and other.pk < document.pk:
                continue  # the pair is reported once
            searched = other.status == Document.ACTIVE and not other.review_paragraphs
            if other.pk in chosen or searched:
                state = "is approved with it" if other.pk in chosen else "is already searched"
                if document.collection.on_conflict == Collection.NEWER_REPLACES and other.pk not in chosen:
                    warnings.append(
                        f"{document.name} conflicts with {other.name}, which is already searched: its "
                        "conflicting paragraphs are switched off, replaced by the approved version"
                    )
                    continue
                warnings.append(
                    f"{document.name} conflicts with {other.name}, which {state}: agents will get both "
                    "answers"
                )
    return warnings
