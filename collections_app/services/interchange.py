"""Exporting a collection's current build as seed 004's ``rag/<index_id>/``, and importing one.

The format itself (bytes, validation) lives in the pure ``collections_app.interchange``; this
module maps it onto the store. An import reads and checks all four files before it writes
anything, then replaces the collection's documents and paragraphs in one transaction, as a
build does, so searches see the old collection until they see the whole new one.

How the fields map is written up in docs/interchange.md.
"""

import logging
import re
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
from django.db import transaction
from django.utils import timezone

from ragsite import embedding
from ragsite.analyzers import SIMPLE
from ragsite.errors import Conflict, NotFound, RagsiteError
from ragsite.lexical import BM25Index

from .. import interchange as fmt
from ..errors import EmptyBuild
from ..index.vector_codec import VectorFormatError, encode, first_window
from ..models import Agent, Collection, CollectionBuilt, Document, Paragraph
from ..text.chunking import TOKEN_METHODS, ChunkingError, resolve_sizes
from ..text.sections import sections_of_pieces
from .agents import create_collection
from .builds import ACTIVE_STATES
from .indexes import index_committed_build, mapped_index

logger = logging.getLogger("ragsite.interchange")

CREATED_AT_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
# A chunk shares at least this many characters with the one before it before the two are taken
# to overlap; a shorter match (a repeated letter or word) is chance.
MIN_OVERLAP_CHARS = 16
ABSOLUTE = re.compile(r"^(?:[/\\]|[A-Za-z]:[/\\]|[A-Za-z][A-Za-z0-9+.-]*://)")


class InvalidIndex(RagsiteError):
    code = "invalid_index"
    status = 400


def _invalid(exc: fmt.InterchangeError) -> InvalidIndex:
    return InvalidIndex(f"the index is not valid: {exc}")


# --- export -----------------------------------------------------------------


def export_index(*, collection: Collection, directory: Path) -> Path:
    """Write ``directory/rag/<collection name>/`` from the collection's current build; return that folder.

    Only what search can reach is written — paragraphs enabled, of active and enabled documents — in
    ordinal order, renumbered from 0.
    """
    built = CollectionBuilt.objects.filter(collection=collection).first()
    if built is None:
        raise Conflict(
            f'collection "{collection.name}" has never been built; build it first', code="never_built"
        )
    rows = list(
        Paragraph.objects.filter(
            collection=collection,
            document__status=Document.ACTIVE,
            enabled=True,
            in_review=False,
            document__enabled=True,
        )
        .order_by("ordinal")
        .values_list(
            "document__name",
            "index",
            "text",
            "token_count",
            "embedding",
            "document__built_size",
            "document__built_overlap",
            "id",
            "page_first",
            "page_last",
        )
    )
    if not rows:
        raise Conflict(
            f'collection "{collection.name}" has no paragraphs in search to export', code="nothing_to_export"
        )
    if any(vector is None for _n, _k, _t, _c, vector, *_rest in rows):
        raise Conflict(
            f'collection "{collection.name}" was built without vectors (model {built.model}); '
            "the format needs one per paragraph",
            code="no_vectors",
        )
    counts, tokenizer = _token_counts(built.model, [(text, count) for _n, _k, text, count, *_r in rows])
    # k is the position within the document among the paragraphs exported, which is the k every search
    # answer and MCP resource cites (search.plan.citing_mask): a paragraph switched off inside a document
    # is left out here and renumbers the later ones of its document there too.
    position: dict[str, int] = {}
    chunks = []
    for (name, _k, text, *_r, first, last), n in zip(rows, counts, strict=True):
        pages = (first, last) if first is not None else None
        chunks.append(fmt.Chunk(doc_id=name, k=position.get(name, 0), text=text, n_tokens=n, pages=pages))
        position[name] = position.get(name, 0) + 1
    # One row per paragraph: its first window (see docs/interchange.md, "Long paragraphs").
    try:
        vectors = np.stack([first_window(r[4], built.dimensions) for r in rows])
        # Unit length again after the store's float16 rounding (which moves a norm by up to ~5e-4).
        vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype("<f4").reshape(-1)
    except VectorFormatError:
        raise Conflict(
            f'collection "{collection.name}" holds vectors that are not {built.dimensions} wide; rebuild it',
            code="width_mismatch",
        ) from None
    # What the paragraphs were cut with, as their documents record it (the collection's own
    # settings may have changed since the build).
    size, overlap = rows[0][5], rows[0][6]
    if overlap is None:
        size, overlap = resolve_sizes(built.method, None, None)
    meta = fmt.Meta(
        index_id=collection.name,
        created_at=built.built_at.astimezone(UTC).strftime(CREATED_AT_FORMAT),
        n_chunks=len(chunks),
        dim=built.dimensions,
        embedding_model=built.model,
        tokenizer=tokenizer,
        chunker=chunker_block(built.method, size, overlap, [c.n_tokens for c in chunks]),
    )
    try:
        index = fmt.build_index(
            meta=meta, chunks=chunks, vectors=vectors, bm25=_search_postings(collection, built, rows)
        )
        return fmt.write_index(Path(directory), index)
    except fmt.InterchangeError as exc:
        raise Conflict(
            f'collection "{collection.name}" cannot be exported: {exc}', code="not_exportable"
        ) from None
    except OSError as exc:
        raise RagsiteError(
            f"could not write the index ({exc.strerror or type(exc).__name__})", code="unwritable", status=500
        ) from None


def _search_postings(collection: Collection, built: CollectionBuilt, rows: list) -> BM25Index | None:
    """The build's own BM25 postings when the export holds exactly the rows its search index does
    (every document active) in seed 004's terms: one scoring implementation, and no second tokenisation
    of every text. A collection searched with another analyzer (stemmed, bigrams) exports the seed's terms
    all the same, tokenised here (``rag/<index_id>/`` is the seed's format whatever a collection uses)."""
    if built.analyzer != SIMPLE:
        return None
    _key, index = mapped_index(collection, built)
    if index.analyzer != SIMPLE or index.size != len(rows):
        return None
    if not np.array_equal(index.row_paragraph, [r[7] for r in rows]):
        return None  # some documents are held back: the export's statistics are its own rows'
    return index.bm25_index()


def _token_counts(model: str, paragraphs: list[tuple[str, int | None]]) -> tuple[list[int], str]:
    """docs.jsonl's n_tokens and meta.json's tokenizer: the model's own counts (seed 004).

    A paragraph stored without a count is counted now by the configured embedder when it is the
    model that built the collection. When some still cannot be counted (an endpoint with neither
    /count_tokens nor /v1/tokenize), the index says nobody counted: tokenizer "" and those
    n_tokens 0, rather than name a tokenizer for numbers it never produced.
    """
    counts = [count for _text, count in paragraphs]
    if None in counts:
        embedder = embedding.get_embedder()
        if embedder.model == model:
            counts = [embedder.count_tokens(text) if count is None else count for text, count in paragraphs]
    if None in counts:
        return [count or 0 for count in counts], ""
    return counts, model


def chunker_block(method: str, size: int | None, overlap: int, n_tokens: list[int]) -> dict:
    """meta.json's chunker: the seed's max_tokens/overlap (in tokens), plus ragsite's method.

    Token-counted methods give their own size and overlap. Character-counted ones (structure,
    fixed) have no token overlap to give: max_tokens is the longest chunk actually written, overlap
    0, and their character settings go in "chars" so an import can restore them.
    """
    longest = max(n_tokens, default=0)
    if method in TOKEN_METHODS:  # sizes in model tokens, like the seed's chunker block
        return {"max_tokens": size if size is not None else longest, "overlap": overlap, "method": method}
    return {
        "max_tokens": longest,
        "overlap": 0,
        "method": method,
        "chars": {"size": size, "overlap": overlap},
    }


def chunking_of(chunker: dict) -> tuple[str, int | None, int]:
    """(method, size, overlap) for the store from a meta.json chunker block; no method means "tokens"."""
    method = chunker.get("method", "tokens")
    chars = chunker.get("chars")
    if not isinstance(method, str):
        raise fmt.InterchangeError(fmt.META, "chunker.method", "expected a string")
    if isinstance(chars, dict) and method not in TOKEN_METHODS:
        size, overlap = chars.get("size"), chars.get("overlap")
    else:
        size, overlap = chunker["max_tokens"] or None, chunker["overlap"]
    try:
        size, overlap = resolve_sizes(method, size, overlap)
    except (ChunkingError, TypeError) as exc:
        raise fmt.InterchangeError(fmt.META, "chunker", str(exc)) from None
    return method, size, overlap


# --- import -----------------------------------------------------------------


def import_index(*, agent: Agent, directory: Path, index_id: str, name: str | None = None) -> Collection:
    """Read ``directory/rag/<index_id>/``, check all of it, then create or replace the collection ``name``.

    The index is imported as it is: a collection whose embedding_model is not the server's embedder
    imports, and its vector searches then refuse with ``model_mismatch``.
    """
    if not index_id or "/" in index_id or "\\" in index_id or index_id in (".", ".."):
        raise InvalidIndex(f'"{index_id[:100]}" is not an index id', code="invalid_index_id")
    folder = Path(directory) / "rag" / index_id
    if not folder.is_dir():
        raise NotFound(
            f'no index "{index_id}" under the directory given (looked for rag/{index_id}/)', code="no_index"
        )
    try:
        index = fmt.read_index(folder, index_id=index_id)
        method, size, overlap = chunking_of(index.meta.chunker)
        _check_document_names(index.chunks)
    except fmt.InterchangeError as exc:
        raise _invalid(exc) from None
    if not index.chunks:
        raise EmptyBuild(f'index "{index_id}" holds no chunks; nothing was imported')
    name = name or index_id
    starts, ends = _offsets(index.chunks)
    created_at = _parse_created_at(index.meta.created_at)

    with transaction.atomic():
        collection = Collection.objects.select_for_update().filter(agent=agent, name=name).first()
        if collection is None:
            collection = create_collection(agent=agent, name=name, method=method, size=size, overlap=overlap)
        elif collection.runs.filter(status__in=ACTIVE_STATES).exists():
            raise Conflict(
                f'a build of "{name}" is queued or running; import after it ends', code="build_running"
            )
        changed = (collection.method, collection.size, collection.overlap) != (method, size, overlap)
        if changed:
            collection.method, collection.size, collection.overlap = method, size, overlap
            collection.save(update_fields=["method", "size", "overlap"])
        changed |= _replace(collection, agent, index, method, size, overlap, starts, ends)
        previous = CollectionBuilt.objects.filter(collection=collection).first()
        record = dict(
            agent_id=agent.agent_id,
            model=index.meta.embedding_model,
            dimensions=index.meta.dim,
            method=method,
            # The files' bm25.idx is seed 004's (simple) terms; the search index is written from the
            # rows with the collection's own analyzer (services.indexes), as a build's is.
            analyzer=collection.analyzer,
            built_from=collection.built_from,
            passages=len(index.chunks),
            # The format carries no refusals: "nobody recorded", never "nothing refused" (seed 000).
            refused=None,
            # Seeds the IVF's k-means++ (seed 004): the same files give the same centroids under any name.
            index_id=index_id,
        )
        if changed or previous is None or any(getattr(previous, k) != v for k, v in record.items()):
            record["built_at"] = _built_at(created_at, previous.built_at if previous else None)
            CollectionBuilt.objects.update_or_create(collection=collection, defaults=record)
        else:
            # Seed 004 (ag.06): re-ingesting what is already there writes nothing, not even the record,
            # so searches keep the index they have loaded.
            logger.info(
                "index %s is what %s/%s already holds; nothing was written", index_id, agent.agent_id, name
            )
            return collection
    index_committed_build(collection=collection)
    logger.info(
        "imported index %s into %s/%s: %s paragraphs", index_id, agent.agent_id, name, len(index.chunks)
    )
    return collection


def _check_document_names(chunks: list[fmt.Chunk]) -> None:
    # doc_id becomes a document's name, shown to people and agents: never a path on some machine.
    for line, chunk in enumerate(chunks, start=1):
        if ABSOLUTE.match(chunk.doc_id):
            raise fmt.InterchangeError(
                fmt.DOCS, "doc_id", "is an absolute path or URL; names must be relative", line=line
            )
        if len(chunk.doc_id) > Document._meta.get_field("name").max_length:
            raise fmt.InterchangeError(fmt.DOCS, "doc_id", "longer than 500 characters", line=line)


def _parse_created_at(value: str) -> datetime:
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise _invalid(
            fmt.InterchangeError(fmt.META, "created_at", f'"{value[:50]}" is not an ISO 8601 time')
        ) from None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def _built_at(created_at: datetime, previous: datetime | None) -> datetime:
    """The index's created_at, so a re-export writes the same meta.json, plus sub-second noise.

    Loaded indexes are cached per process by built_at; the export writes whole seconds, so the
    microseconds are free to make each import's built_at differ from the build it replaces.
    """
    built_at = created_at.replace(microsecond=timezone.now().microsecond or 1)
    while previous is not None and built_at == previous:
        built_at += timedelta(microseconds=1)
    return built_at


def _offsets(chunks: list[fmt.Chunk]) -> tuple[list[int], list[int]]:
    """Character offsets for each chunk in its document, which the format does not carry.

    Stitching uses them to avoid repeating text two chunks share. A chunk that begins with the end
    of the previous chunk of its document is placed to overlap it by that much; otherwise it follows
    one character on, the whitespace the format does not carry (stitching joins such chunks with a
    space, or a new line before a heading).
    """
    starts, ends = [], []
    last: dict[str, tuple[str, int]] = {}
    for chunk in chunks:
        previous = last.get(chunk.doc_id)
        if previous is None:
            start = 0
        else:
            text, end = previous
            shared = _overlap(text, chunk.text)
            start = end - shared if shared else end + 1
        starts.append(start)
        ends.append(start + len(chunk.text))
        last[chunk.doc_id] = (chunk.text, ends[-1])
    return starts, ends


def _overlap(before: str, after: str) -> int:
    for length in range(min(len(before), len(after)), MIN_OVERLAP_CHARS - 1, -1):
        if before.endswith(after[:length]):
            return length
    return 0


def _replace(collection, agent, index: fmt.RagIndex, method, size, overlap, starts, ends) -> bool:
    """Make the collection's documents and paragraphs those of the index; True when anything was written.

    Documents are matched by doc_id (existing rows kept, so their default labels and approvals stay).
    A document whose paragraphs are the index's chunks already (same k, text, vector and count) keeps
    its rows and their ids, as a rebuild keeps an unchanged document's; only their ordinals follow the
    index. Any other document's paragraphs are replaced, a paragraph whose document and text are
    unchanged keeping its labels.
    """
    vectors = np.ascontiguousarray(index.vectors, dtype="<f4")
    uncounted = not index.meta.tokenizer  # how ragsite writes an index nobody could count (see export)
    by_document: dict[str, list[int]] = defaultdict(list)
    for ordinal, chunk in enumerate(index.chunks):
        by_document[chunk.doc_id].append(ordinal)

    def token_count(chunk: fmt.Chunk) -> int | None:
        return None if uncounted and chunk.n_tokens == 0 else chunk.n_tokens

    existing = {d.name: d for d in collection.documents.all()}
    stored: dict[int, list[tuple]] = defaultdict(list)
    for row in (
        Paragraph.objects.filter(collection=collection)
        .order_by("document_id", "index")
        .values_list("document_id", "pk", "ordinal", "index", "fingerprint", "token_count", "embedding")
    ):
        stored[row[0]].append(row[1:])
    gone = [d.pk for n, d in existing.items() if n not in by_document]
    changed = bool(gone)
    if gone:
        Document.objects.filter(pk__in=gone).delete()

    now = timezone.now()
    renumbered: list[Paragraph] = []
    replaced: dict[str, Document] = {}
    for doc_name, ordinals in by_document.items():
        document = existing.get(doc_name) or Document(
            collection=collection, name=doc_name, source=Document.FOLDER
        )
        rows = stored.get(document.pk, []) if document.pk else []
        same = len(rows) == len(ordinals) and all(
            (k, digest, count, bytes(vector) if vector is not None else None)
            == (
                index.chunks[o].k,
                index.chunks[o].fingerprint,
                token_count(index.chunks[o]),
                encode(vectors[o]),
            )
            for (_pk, _old, k, digest, count, vector), o in zip(rows, ordinals, strict=True)
        )
        if same:
            renumbered += [
                Paragraph(pk=pk, ordinal=o)
                for (pk, old, *_r), o in zip(rows, ordinals, strict=True)
                if old != o
            ]
        else:
            replaced[doc_name] = document
        # The source file's bytes are unknown, so the fingerprint stays empty and the next build
        # from a folder reads the document again.
        state = dict(
            fingerprint="",
            status=Document.ACTIVE,
            paragraph_count=len(ordinals),
            summary="",
            scan_warnings=[],
            conflicts=[],
            built_method=method,
            built_size=size,
            built_overlap=overlap,
            built_model=index.meta.embedding_model,
        )
        if document.pk is None or any(getattr(document, k) != v for k, v in state.items()):
            for k, v in state.items():
                setattr(document, k, v)
            document.updated_at = now
            document.save()
            changed = True
        existing[doc_name] = document
    if renumbered:
        Paragraph.objects.bulk_update(renumbered, ["ordinal"], batch_size=500)
        changed = True
    if replaced:
        _replace_paragraphs(
            collection, agent, index, replaced, by_document, vectors, token_count, starts, ends
        )
        changed = True
    Paragraph.objects.guard_not_empty(collection)
    return changed


def _replace_paragraphs(
    collection, agent, index, documents, by_document, vectors, token_count, starts, ends
) -> None:
    """New paragraphs for the changed documents, carrying labels by (document, text fingerprint)."""
    through = Paragraph.labels.through
    old_labels: dict[tuple[str, str], set[int]] = defaultdict(set)
    for doc_name, digest, label_id in through.objects.filter(
        paragraph__document__in=documents.values()
    ).values_list("paragraph__document__name", "paragraph__fingerprint", "label_id"):
        old_labels[(doc_name, digest)].add(label_id)
    Paragraph.objects.filter(document__in=documents.values()).delete()
    ordinals = sorted(o for name in documents for o in by_document[name])
    # docs.jsonl holds no sections: each is read back off the heading lines the chunks hold (a parent
    # collection answers a hit with its section, so an imported one needs them).
    section = {}
    for name in documents:
        mine = sorted(by_document[name])
        named = sections_of_pieces([index.chunks[o].text for o in mine])
        section.update(zip(mine, named, strict=True))
    rows = [
        Paragraph(
            agent_id=agent.agent_id,
            collection=collection,
            document=documents[index.chunks[o].doc_id],
            ordinal=o,
            index=index.chunks[o].k,
            section=section[o],
            text=index.chunks[o].text,
            start_char=starts[o],
            end_char=ends[o],
            page_first=index.chunks[o].pages[0] if index.chunks[o].pages else None,
            page_last=index.chunks[o].pages[1] if index.chunks[o].pages else None,
            token_count=token_count(index.chunks[o]),
            fingerprint=index.chunks[o].fingerprint,
            embedding=encode(vectors[o]),
        )
        for o in ordinals
    ]
    created = Paragraph.objects.bulk_create(rows, batch_size=500)
    if old_labels:
        if not all(p.pk for p in created):
            created = list(
                Paragraph.objects.filter(document__in=documents.values())
                .select_related("document")
                .order_by("ordinal")
            )
        links = [
            through(paragraph_id=p.pk, label_id=label_id)
            for p in created
            for label_id in old_labels.get((p.document.name, p.fingerprint), ())
        ]
        through.objects.bulk_create(links, batch_size=1000, ignore_conflicts=True)


__all__ = ["InvalidIndex", "chunker_block", "chunking_of", "export_index", "import_index"]
