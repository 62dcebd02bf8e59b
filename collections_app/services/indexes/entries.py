"""The entries part of a build's mapped index (ENTRIES): a list's, table's or Q/A run's entries
(`text.entries`) as rows of their own beside the paragraphs, written with the paragraphs' index.

The entries are gathered from the rows the paragraphs' writer reads anyway (`EntryRows.add`, a row at a
time), so they cost the index no read of the rows of their own: not a query asking whether any row has
entries, nor a second pass over every row's text."""

from __future__ import annotations

import logging

import numpy as np

from ...conf import settings
from ...index.postings import row_postings
from ...index.vector_codec import VectorFormatError, decode
from ...index.writer import IndexWriter
from ...models import CollectionBuilt
from ...text.entries import entry_spans

logger = logging.getLogger("ragsite.search")


class EntryRows:
    """The entries of the rows that have them, gathered while the rows are read in order: each row's
    `entries.entry_spans` of its fresh text (after its carried opening), one stored vector each.

    A row whose stored entry vectors do not match its spans (another version's) is left without entries."""

    def __init__(self, collection_id: int, built: CollectionBuilt, rows_per_block: int):
        self.collection_id = collection_id
        self.dimensions = int(built.dimensions)
        self.analyzer = built.analyzer
        self.rows_per_block = rows_per_block
        self.entries, self.contexts = IndexWriter(self.dimensions), IndexWriter(0)
        self.owners: list[int] = []  # each entry's row number
        self.spans: list[tuple[int, int]] = []
        self._block: list[tuple] = []

    def add(self, number: int, paragraph_id, document_id, text: str, context, blob, carried: int) -> None:
        """Row `number` (in ordinal order) with its stored entry vectors `blob` (None: it has none)."""
        if blob is None:
            return
        spans = entry_spans(text, carried)
        vectors = stored_entries(blob, spans, self.dimensions)
        if vectors is None:
            logger.warning(
                "index of collection %s: a paragraph's entry vectors do not match its entries",
                self.collection_id,
            )
            return
        for (a, b), vector in zip(spans, vectors, strict=True):
            self._block.append((paragraph_id, document_id, text[a:b], context, vector[None, :]))
            self.owners.append(number)
            self.spans.append((a, b))
        if len(self._block) >= self.rows_per_block:
            self.flush()

    def flush(self) -> None:
        """Tokenize and add the entries gathered since the last flush."""
        block = self._block
        if not block:
            return
        ids, documents = [b[0] for b in block], [b[1] for b in block]
        texts, context, _carried = row_postings(
            [b[2] for b in block], [b[3] for b in block], [0] * len(block), self.analyzer
        )
        self.entries.add_postings(ids, documents, texts, [b[4] for b in block])
        self.contexts.add_postings(ids, documents, context, [None] * len(block))
        self._block = []


def stored_entries(blob, spans: list[tuple[int, int]], dimensions: int) -> np.ndarray | None:
    """A row's stored entry vectors (`Paragraph.entry_embedding`), one matrix row for each of its entries
    ``spans``; None when they do not match them (another version's, or another width's)."""
    try:
        vectors = decode(blob, dimensions)
    except VectorFormatError:
        return None
    return vectors if vectors.shape[0] == len(spans) else None


def entry_rows(collection_id: int, built: CollectionBuilt, rows_per_block: int) -> EntryRows | None:
    """Where to gather a build's entries while its rows are read; None without ENTRIES (or vectors)."""
    if not settings.ENTRIES or not built.dimensions:
        return None
    return EntryRows(collection_id, built, rows_per_block)


def entry_writers(gathered: EntryRows | None) -> tuple[IndexWriter, IndexWriter] | None:
    """The entries gathered, as two parts whose rows are entries in row order (their text and vectors, and
    the context of their row); ``entry_row.i32`` names each entry's row. None: no row has any."""
    if gathered is None:
        return None
    gathered.flush()
    if not gathered.owners:
        return None
    entries = gathered.entries
    entries.arrays["entry_row.i32"] = np.asarray(gathered.owners, dtype=np.int32)
    entries.arrays["entry_span.i32"] = np.asarray(gathered.spans, dtype=np.int32).reshape(-1)
    return entries, gathered.contexts
