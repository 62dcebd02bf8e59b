"""Review: a person approving documents that a build put in `needs_review`.

A document lands in review when its scan raised warnings or it conflicts with
another document (seed 003). It is not searched until approved. Approval is of
one version: `approved_fingerprint` records which bytes were approved, so a
changed file goes back to review at its next build.
"""

import logging
from collections.abc import Iterable

from django.db import transaction

from ..models import Document

logger = logging.getLogger("ragsite.review")


def approve_documents(documents: Iterable[Document], *, by=None) -> list[Document]:
    """Make the needs-review documents among `documents` active; returns those approved.

    Documents in any other state are left alone: an active one needs nothing, and a
    refused one could not be read, so there is nothing a person could approve.
    """
    ids = [d.pk for d in documents]
    who = by.get_username() if by is not None and hasattr(by, "get_username") else str(by or "")
    approved = []
    with transaction.atomic():
        for document in Document.objects.select_for_update().filter(pk__in=ids, status=Document.NEEDS_REVIEW):
            document.status = Document.ACTIVE
            document.approved_fingerprint = document.fingerprint
            document.save(update_fields=["status", "approved_fingerprint"])
            approved.append(document)
    for document in approved:
        # The document's name and collection only: never its text, never a path.
        logger.info("document %s in collection %s approved by %s", document.name, document.collection_id, who or "?")
    return approved
