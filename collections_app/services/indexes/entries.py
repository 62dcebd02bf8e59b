"""The entries part of a build's mapped index (ENTRIES): a list's, table's or Q/A run's entries
(`text.entries`) as rows of their own beside the paragraphs, written with the paragraphs' index."""

from __future__ import annotations

import logging

import numpy as np

from ...conf import settings
from ...index.postings import row_postings
from ...index.vector_codec import VectorFormatError, decode
from ...index.writer import IndexWriter
from ...models import Collection, CollectionBuilt, Paragraph
from ...text.entries import entry_spans
from ...text.stitch import carried_openings

logger = logging.getLogger("ragsite.search")


def entry_writers(
    collection: Collection, built: CollectionBuilt, rows_per_block: int
) -> tuple[IndexWriter, IndexWriter] | None:
    """With ENTRIES, the entries of the rows that have them (`entries.entry_spans` of each row's fresh
    text, one stored vector each): their text and vectors, and the context of their row, as two parts
    whose rows are entries in row order; ``entry_row.i32`` names each entry's row. None: no row has any.

    A row whose stored entry vectors do not match its spans (another version's) is left without entries."""
    if not settings.ENTRIES or not built.dimensions:
        return None
    if not Paragraph.objects.filter(collection=collection, entry_embedding__isnull=False).exists():
        return None
    rows = (
        Paragraph.objects.filter(collection=collection)
        .order_by("ordinal")
        .values_list("document_id", "start_char", "end_char", "id", "text", "context", "entry_embedding")
    )
    current: list[tuple] = []

    def positions():
        for row in rows.iterator(chunk_size=rows_per_block):
            current[:] = [row]
            yield row[:3]

    entries, contexts = IndexWriter(built.dimensions), IndexWriter(0)
    owners: list[int] = []
    spans_of: list[tuple[int, int]] = []
    block: list[tuple] = []

    def flush():
        if not block:
            return
        ids, documents = [b[0] for b in block], [b[1] for b in block]
        texts, context, _carried = row_postings(
            [b[2] for b in block], [b[3] for b in block], [0] * len(block), built.analyzer
        )
        entries.add_postings(ids, documents, texts, [b[4] for b in block])
        contexts.add_postings(ids, documents, context, [None] * len(block))
        block.clear()

    for number, (carried, _first) in enumerate(carried_openings(positions())):
        document_id, _start, _end, paragraph_id, text, context, blob = current[0]
        if blob is None:
            continue
        spans = entry_spans(text, carried)
        try:
            vectors = decode(blob, built.dimensions)
        except VectorFormatError:
            vectors = None
        if vectors is None or vectors.shape[0] != len(spans):
            logger.warning(
                "index of collection %s: a paragraph's entry vectors do not match its entries", collection.pk
            )
            continue
        for (a, b), vector in zip(spans, vectors, strict=True):
            block.append((paragraph_id, document_id, text[a:b], context, vector[None, :]))
            owners.append(number)
            spans_of.append((a, b))
        if len(block) >= rows_per_block:
            flush()
    flush()
    if not owners:
        return None
    entries.arrays["entry_row.i32"] = np.asarray(owners, dtype=np.int32)
    entries.arrays["entry_span.i32"] = np.asarray(spans_of, dtype=np.int32).reshape(-1)
    return entries, contexts
