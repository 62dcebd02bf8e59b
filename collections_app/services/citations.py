"""Reading back one cited paragraph by its chunk id, exactly as a search would show it to the same reader.

An MCP search answer links each paragraph it cites (`resources/read` on `ragsite://…`, see
`mcp_tools`); reading the link must show no more than the search could: the same held-back
documents and paragraphs, the same reader labels, and the same cut of text shared with a hidden
neighbour. So the read goes through the search's own mask and stitching, for one row and no
neighbours. A paragraph that is hidden from this reader and one that does not exist answer alike.
The API reads the same through `GET /api/v1/collections/<name>/paragraph?chunk_id=…&reader=…`.
"""

from __future__ import annotations

import numpy as np

from ragsite.errors import Conflict, NotFound

from ..models import Agent, Document, Paragraph
from .agents import get_collection
from .indexes import mapped_index
from .readers import resolve_reader
from .search.plan import citing_mask, readable_mask
from .search.rows import search_state
from .search.stitched import stitched


def read_cited(*, agent: Agent, collection: str, chunk_id: str, reader: str | None = None) -> dict:
    """`{"chunk_id", "document", "section", "text"}` of the paragraph `<document>#<k>` in one of the
    agent's collections, as `reader` may see it; NotFound (`unknown_paragraph`) when it may not."""
    found = get_collection(agent=agent, name=collection)
    reader_obj = resolve_reader(found, reader)
    built, *held_back = search_state(found)
    if built is None:
        raise Conflict(f'collection "{found.name}" has never been built', code="not_built")
    _key, index = mapped_index(found, built)
    mask = readable_mask(found, index, reader_obj, tuple(held_back))
    missing = NotFound(
        f'no paragraph "{chunk_id[:200]}" in collection "{found.name}"', code="unknown_paragraph"
    )
    document, _hash, k = chunk_id.rpartition("#")
    # A NUL cannot be stored, so names nothing (and PostgreSQL refuses it in a query: never sent); k is
    # written as the answers write it (ASCII digits, no leading zero), so no id has two spellings.
    canonical = k.isascii() and k.isdigit() and len(k) <= 9 and k == str(int(k))
    if not document or "\x00" in document or not canonical:
        raise missing
    per_reader = reader_obj is not None
    citing = None if per_reader else citing_mask(found, index, tuple(held_back))
    row = _row_cited(
        found, index, mask if citing is None else citing, document, int(k), per_reader=per_reader
    )
    if row is None or not mask[row]:
        raise missing
    paragraphs = stitched(index, mask, [(row, 0.0)], 0, per_reader=per_reader, citing=citing).paragraphs
    if not paragraphs:  # the whole text is a hidden neighbour's copy
        raise missing
    shown = paragraphs[0]
    return {key: shown[key] for key in ("chunk_id", "document", "section", "text")}


def _row_cited(collection, index, mask, document: str, k: int, *, per_reader: bool) -> int | None:
    """The index row `<document>#<k>` names for this search's mask, None when it names none it may read.

    A per-reader id counts only the paragraphs of its document the reader may read
    (`search.stitched._citable`), so ``k`` is the k-th of those. Otherwise, while a paragraph inside
    a document is switched off, ``mask`` is the rows in search (`plan.citing_mask`) and ``k`` the k-th
    of its document's, as export_index numbers them; with none switched off it is the paragraph's own
    position in its document (`Paragraph.index`).
    """
    if per_reader or not mask.all():
        document_id = (
            Document.objects.filter(collection=collection, name=document).values_list("id", flat=True).first()
        )
        if document_id is None:
            return None
        readable = np.flatnonzero((index.row_document == document_id) & mask)
        return int(readable[k]) if k < readable.size else None
    paragraph = (
        Paragraph.objects.filter(collection=collection, document__name=document, index=k)
        .values_list("id", flat=True)
        .first()
    )
    rows = [] if paragraph is None else (index.row_paragraph == paragraph).nonzero()[0]
    return int(rows[0]) if len(rows) and mask[rows[0]] else None
