"""A search's `filters` (index.filters) read against the store: which rows of an index they keep.

Parsed before anything else is read, so a malformed filter costs nothing; the mask is then one
more `&=` on the rows a search may read (search._readable_mask), beside held-back documents and
a reader's labels, and everything downstream — ranking, statistics, stitching, positions —
follows it (docs/collections.md).
"""

from __future__ import annotations

import numpy as np

from ragsite.errors import RagsiteError

from ... import errors
from ...index.filters import SECTION, Filter, FilterError, RowFacts, keys_of, parse_filter, row_mask
from ...index.mapped import MappedIndex
from ...models import Collection, Document, Paragraph


def parse_filters(filters: object) -> Filter | None:
    """A request's `filters` checked (None when absent); RagsiteError `invalid_filters` saying where."""
    if filters is None:
        return None
    try:
        return parse_filter(filters)
    except FilterError as exc:
        raise RagsiteError(str(exc), code=errors.INVALID_FILTERS) from None


def filter_mask(
    collection: Collection, index: MappedIndex, parsed: Filter, readable: np.ndarray | None = None
) -> np.ndarray:
    """The rows of `index` that `parsed` keeps: documents and their attributes in one query, sections
    only when the filter names `section`.

    `readable` is the rows the search may read (held-back documents and the reader's labels already
    applied): whatever a filter's validity depends on is judged over those rows only, so a reader who
    can read no paged paragraph is told "no page numbers" exactly as a collection without hidden ones
    would tell them (the twin rule)."""
    documents = {
        pk: (name, attributes or {})
        for pk, name, attributes in Document.objects.filter(collection=collection).values_list(
            "id", "name", "attributes"
        )
    }

    def sections() -> list[str]:
        by_paragraph = dict(Paragraph.objects.filter(collection=collection).values_list("id", "section"))
        return [by_paragraph.get(int(pk), "") for pk in index.row_paragraph]

    def pages() -> tuple[np.ndarray, np.ndarray] | None:
        # Each row's first and last page (NaN for a paragraph without pages); None when none has any.
        known = {
            pk: (first, last)
            for pk, first, last in Paragraph.objects.filter(collection=collection)
            .exclude(page_first=None)
            .values_list("id", "page_first", "page_last")
        }
        spans = [known.get(int(pk), (np.nan, np.nan)) for pk in index.row_paragraph]
        first = np.array([first for first, _last in spans], dtype=float)
        last = np.array([last for _first, last in spans], dtype=float)
        paged = ~np.isnan(first) if readable is None else readable & ~np.isnan(first)
        return (first, last) if paged.any() else None

    facts = RowFacts(
        row_document=np.asarray(index.row_document),
        documents=documents,
        sections=sections if SECTION in keys_of(parsed) else list,
        pages=pages,
    )
    try:
        return row_mask(parsed, facts)
    except FilterError as exc:
        raise RagsiteError(str(exc), code=errors.INVALID_FILTERS) from None
