"""Embedding what a build must: vectors of unchanged pieces are reused, the rest computed in batches."""

import numpy as np

from ragsite import embedding

from ...conf import settings
from ...index.vector_codec import encode
from ...interchange import fingerprint as text_fingerprint
from ...models import (
    Collection,
    Document,
    ModelCall,
    Paragraph,
)
from ...text.context import CONTEXT_VERSION, embedding_text
from ...text.entries import entry_spans
from ...text.stitch import carried_openings, fresh_text
from ...text.windows import embed_in_windows
from .prepare import Prepared


def _known_vectors(collection: Collection, model: str) -> dict[tuple[str, str, int], tuple]:
    """Vectors this model made (a paragraph's, and its entries' or None), by what they embed: text
    fingerprint, context, carried characters left out. One built before CONTEXT_VERSION 2 embedded its
    whole text: reused only where nothing is carried."""
    rows = (
        Paragraph.objects.filter(collection=collection, document__built_model=model)
        .order_by("ordinal")
        .values_list(
            "document_id",
            "start_char",
            "end_char",
            "fingerprint",
            "context",
            "embedding",
            "entry_embedding",
            "document__built_context",
        )
    )
    known, current = {}, []  # current: the row carried_openings is at (it reads one row a step)

    def positions():
        for row in rows.iterator(chunk_size=2000):
            current[:] = [row]
            yield row[:3]

    for carried, _first in carried_openings(positions()):
        _document, _start, _end, fp, context, vector, entries, version = current[0]
        if vector is not None and (version >= CONTEXT_VERSION or carried == 0):
            known[(fp, context, carried)] = (vector, entries)
    return known


def _embed_missing(prepared, embedder, known_vectors, run, progress, collection) -> None:
    todo: list[tuple[Prepared, int]] = []
    entries_todo: list[tuple[Prepared, int]] = []  # ENTRIES: pieces whose entries need vectors
    lexical_only = embedder.backend == "none"
    with_entries = bool(settings.ENTRIES) and not lexical_only
    for item in prepared:
        if item.reused or item.status == Document.REFUSED:
            continue
        item.vectors = [None] * len(item.pieces)
        item.entry_vectors = [None] * len(item.pieces)
        for i, piece in enumerate(item.pieces):
            vector, entries = known_vectors.get(
                (text_fingerprint(piece.text), item.contexts[i], item.carried[i]), (None, None)
            )
            if vector is not None:
                item.vectors[i] = bytes(vector)
            elif not lexical_only:
                todo.append((item, i))
            if with_entries and entry_spans(piece.text, item.carried[i]):
                if entries is not None:
                    item.entry_vectors[i] = bytes(entries)
                else:
                    entries_todo.append((item, i))
    progress.save(
        force=True, documents_done=run.documents_total, paragraphs_total=len(todo), paragraphs_done=0
    )
    tokens_used = _embed_entries(entries_todo, embedder)
    batch = embedding.progress_step(embedder, len(todo)) if todo else 1  # the bar moves after each call
    for start in range(0, len(todo), batch):
        chunk_of = todo[start : start + batch]
        # Embedded from the end of the text a piece shares with earlier ones, so no vector holds words
        # of a paragraph whose labels may differ (docs/security.md).
        blobs, tokens = embed_in_windows(
            [
                embedding_text(fresh_text(item.pieces[i].text, item.carried[i]), item.contexts[i])
                for item, i in chunk_of
            ],
            embedder,
        )
        for (item, i), blob in zip(chunk_of, blobs, strict=True):
            item.vectors[i] = blob
        tokens_used += tokens or 0
        run.paragraphs_embedded += len(chunk_of)
        progress.save(paragraphs_done=run.paragraphs_embedded)
    if embedder.backend == "http" and tokens_used:
        from ..ledger import record_call

        record_call(
            agent=collection.agent,
            collection=collection,
            purpose=ModelCall.EMBED,
            model=embedder.model,
            tokens_in=tokens_used,
        )


# Entries embedded per call to the model.
ENTRY_BATCH = 256


def _embed_entries(todo: list, embedder) -> int:
    """Each piece's entries (`entries.entry_spans` of its fresh text) embedded with its context, one vector
    an entry (the model's first window: an entry is a line or a few), into ``item.entry_vectors``; the
    tokens used."""
    texts, owners = [], []
    for item, i in todo:
        text = item.pieces[i].text
        for a, b in entry_spans(text, item.carried[i]):
            texts.append(embedding_text(text[a:b], item.contexts[i]))
            owners.append((item, i))
    tokens_used, vectors = 0, []
    for start in range(0, len(texts), ENTRY_BATCH):
        embedded = embedder.embed_with_usage(texts[start : start + ENTRY_BATCH])
        vectors.extend(embedded.vectors)
        tokens_used += embedded.tokens or 0
    at = 0
    for item, i in todo:
        count = len(entry_spans(item.pieces[i].text, item.carried[i]))
        item.entry_vectors[i] = encode(np.asarray(vectors[at : at + count], dtype=np.float32))
        at += count
    return tokens_used
