"""The rows the known answers are asked of, and the in-memory index over them (`collections_app.scratch`),
which ranks as a search of the collection built from them ranks: their stored vectors and, with ENTRIES,
their stored entry vectors, as the index writer reads them (`services.indexes.entries`)."""

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ragsite import embedding
from ragsite.analyzers import terms_of
from ragsite.errors import Conflict
from ragsite.lexical import BM25Index

from ...index.vector_codec import VectorFormatError, decode
from ...measure import Question
from ...models import Collection, ModelCall
from ...scratch import ScratchIndex, add_entries
from ...text.entries import entry_spans
from ...text.stitch import Row, carried_openings
from ..indexes.entries import stored_entries

# The stored fields of a paragraph a `CandidateRow` holds after its document and whether it is searched.
STORED_FIELDS = (
    "start_char",
    "end_char",
    "text",
    "section",
    "index",
    "embedding",
    "context",
    "entry_embedding",
)


class CandidateRow(NamedTuple):
    """One paragraph as the known answers are measured against it: a live one, or one a build would leave."""

    document: int  # tells documents apart
    searched: bool  # whether a search ranks it (search's row mask before labels: rows.search_state)
    start: int
    end: int
    text: str
    section: str
    index: int  # its position in its document (the k of doc#k): stitching reads where the text runs on
    vector: bytes | None  # its stored windows (vector_codec); None: no vector
    context: str
    entry_vectors: bytes | None = None  # its entries' stored vectors (ENTRIES); None: it has none


def asked_index(
    paragraphs: Sequence[CandidateRow], dimensions: int, analyzer: str, *, entries: bool
) -> ScratchIndex:
    """An in-memory index over the ``paragraphs`` (in ordinal order) a search ranks, in ``analyzer``'s
    terms, as if the others were deleted: search's statistics, ranks and stitching all follow its row mask,
    so this answers exactly as a twin collection without them would.

    Stored vectors are float16 windows (vector_codec); every window of a paragraph is a matrix row,
    and the paragraph's cosine is pooled from them as search pools it. With ``entries`` (ENTRIES), a
    paragraph's stored entry vectors give it its entries, read after its carried opening as the index
    writer reads them (among every paragraph of its document, searched or not).
    """
    carried = [n for n, _first in carried_openings((p.document, p.start, p.end) for p in paragraphs)]
    kept = [(p, n) for p, n in zip(paragraphs, carried, strict=True) if p.searched]
    rows = [
        Row(
            ordinal=i,
            document=p.document,
            start=p.start,
            end=p.end,
            text=p.text,
            section=p.section,
            index=p.index,
        )
        for i, (p, _n) in enumerate(kept)
    ]
    contexts = [p.context for p, _n in kept]
    blocks, owners = [], []
    for i, (paragraph, _n) in enumerate(kept):
        if paragraph.vector is None:
            continue
        try:
            windows = decode(paragraph.vector, dimensions)
        except VectorFormatError:
            raise Conflict(
                f"the paragraphs hold vectors that are not {dimensions} wide; rebuild the collection",
                code="width_mismatch",
            ) from None
        blocks.append(windows)
        owners.append(np.full(windows.shape[0], i, dtype=np.int64))
    matrix = window_row = None
    if blocks:
        matrix = np.concatenate(blocks)
        # One vector for every paragraph: matrix row i is paragraph i, as without windows.
        one_each = len(blocks) == len(kept) and matrix.shape[0] == len(kept)
        window_row = None if one_each else np.concatenate(owners)
    # The title and section beside each paragraph, as search ranks them (collections_app/text/context.py).
    # In the terms of the live build's analyzer, as its search index holds them.
    context_bm25 = BM25Index.from_terms(terms_of(analyzer, contexts)) if any(contexts) else None
    index = ScratchIndex(
        rows=rows,
        bm25=BM25Index.from_terms(terms_of(analyzer, [r.text for r in rows])),
        matrix=matrix,
        window_row=window_row,
        context_bm25=context_bm25,
        analyzer=analyzer,
    )
    if entries and matrix is not None:  # a lexical index has no entries (services.indexes.entries)
        spans = [entry_spans(p.text, n) if p.entry_vectors is not None else [] for p, n in kept]
        stored = [
            stored_entries(p.entry_vectors, row_spans, dimensions) if row_spans else None
            for (p, _n), row_spans in zip(kept, spans, strict=True)
        ]
        add_entries(index, contexts, spans, stored)
    return index


def question_vectors(
    collection: Collection, questions: Sequence[Question], model: str, width: int
) -> np.ndarray:
    """The questions embedded with the build's ``model``, ``width`` wide (`Conflict` when this server cannot),
    the tokens spent recorded as a build's are."""
    embedder = embedding.get_embedder()
    if embedder.model != model:
        raise Conflict(
            f"the build was made with {model} but this server embeds with {embedder.model}",
            code="model_mismatch",
        )
    embedded = embedder.embed_with_usage([q.text for q in questions])
    vectors = np.asarray(embedded.vectors, dtype=np.float32)
    if vectors.shape[1] != width:
        raise Conflict(
            f"the questions were embedded with {vectors.shape[1]} dimensions but the paragraphs have {width}",
            code="width_mismatch",
        )
    if embedder.backend == "http" and embedded.tokens:
        from ..ledger import record_call

        record_call(
            agent=collection.agent,
            collection=collection,
            purpose=ModelCall.EMBED,
            model=embedder.model,
            tokens_in=embedded.tokens,
        )
    return vectors
