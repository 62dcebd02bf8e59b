"""Each build's search index on disk: written when a build or import commits, mapped by searches.

The database stays the source of truth. The index of a build (``mapped_index``) is a derived copy
keyed by the collection and the build's ``built_at``: written whole by the worker that committed the
build and stored beside the build record (services.indexes.store), then fetched and verified by any
node that finds it missing or unusable, or written again from the rows when nothing is stored for the
build (under a per-collection file lock, so one process fetches while the others wait and then map
what it fetched). A large build's index is loaded off the request (services.indexes.loading): its
searches wait at most INDEX_LOAD_WAIT seconds, then answer 503 ``index_loading``. A search process
maps each build once and keeps the mapping until a newer build replaces it.
"""

from __future__ import annotations

import fcntl
import logging
import shutil
import threading
import time
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from datetime import UTC
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

import numpy as np
from django.db import DatabaseError

from ragsite.errors import Conflict, RagsiteError

from ...conf import settings
from ...index.format import FORMAT, IndexUnusable
from ...index.mapped import MappedIndex
from ...index.postings import row_postings
from ...index.writer import IndexWriter
from ...models import Collection, CollectionBuilt, Paragraph
from ...text.context import CONTEXT_VERSION
from ...text.stitch import carried_openings
from . import store
from .entries import EntryRows, entry_rows, entry_writers
from .gauges import MappedIndexes
from .loading import load_in_background
from .pool import in_order, tokenizers
from .vectors import BuildVectors, lists_beside, read_vectors

logger = logging.getLogger("ragsite.search")

ROWS_PER_BLOCK = 5000

_mapped: MappedIndexes = MappedIndexes()  # collection id -> (key, index); publishes its gauges
_mapped_lock = threading.Lock()


def build_key(built: CollectionBuilt) -> str:
    """The directory name of a build's index: its commit time to the microsecond, in UTC."""
    return _key_of(built.built_at, built.passages)


@lru_cache(maxsize=1024)
def _key_of(moment, passages: int) -> str:
    """`build_key`, remembered: every search asks it, and strftime was a tenth of planning one."""
    if moment.utcoffset() is not None:
        moment = moment.astimezone(UTC)
    # Fewer `passages` (a document deleted) or another FORMAT: another key, so another index is written.
    return f"{moment.strftime('%Y%m%dT%H%M%S%fZ')}-{passages}-f{FORMAT}"


def collection_root(collection_id: int) -> Path:
    return Path(settings.INDEX_DIR) / f"c{collection_id}"


def remove_stale(root: Path, keep: str) -> None:
    """Delete a collection's other builds' directories and temporaries (a process mapping one keeps reading
    it)."""
    if not root.is_dir():
        return
    for entry in root.iterdir():
        if entry.name != keep and entry.is_dir():
            shutil.rmtree(entry, ignore_errors=True)


@contextmanager
def _collection_lock(collection_id: int):
    """An exclusive lock (flock) across processes on one collection's index folder."""
    root = collection_root(collection_id)
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def write_index(
    *, collection: Collection, keep_others: bool = False, fetch: bool = True
) -> tuple[str, Path] | None:
    """Write the index of `collection`'s current build from its rows; None when it was never built.

    Rows are streamed in blocks. On PostgreSQL a build can commit between reading the build
    record and the rows, so the record is read again afterwards and the work repeated if it moved.
    `keep_others`: leave the other builds' indexes (a build writing its own before it commits, whose
    transaction may still roll back to the build that answers now). `fetch`: first fetch the files stored
    beside the build (indexes.store) when there are any; a build being committed has none yet.
    """
    with _collection_lock(collection.pk):
        for _attempt in range(5):
            built = CollectionBuilt.objects.filter(collection=collection).first()
            if built is None:
                return None
            key = build_key(built)
            path = collection_root(collection.pk) / key
            if _usable(path, built.analyzer):
                return key, path
            # Broken (torn, truncated, foreign): out of the way, so the rename below can land.
            shutil.rmtree(path, ignore_errors=True)
            started = time.perf_counter()
            if fetch and _fetched(collection, key):
                if not keep_others:
                    remove_stale(collection_root(collection.pk), keep=key)
                return key, path
            # The vectors first, so the IVF lists are made from them while the texts are tokenized.
            vectors = read_vectors(collection, built, ROWS_PER_BLOCK)
            with lists_beside(vectors, built) as lists:
                writer, context, carried, consistent, gathered = _write_rows(collection, built, vectors)
                ivf = None if lists is None else lists.result()
            again = (
                CollectionBuilt.objects.filter(collection=collection)
                .values_list("built_at", "passages")
                .first()
            )
            if again != (built.built_at, built.passages) or not consistent:
                continue  # a newer build committed while the rows were read
            # Contexts are written only when some row has one (context.lexical_with_context then adds them).
            parts = {"context": context} if context.vocabulary else {}
            if carried.vocabulary:  # some row shares text with an earlier one (an overlapping strategy)
                parts["carried"] = carried
            entries = entry_writers(gathered)
            if entries is not None:  # ENTRIES: a list's, table's or Q/A run's entries (text.entries)
                parts["entries"], parts["entries_context"] = entries
            # Whether every vector was embedded without its row's carried opening (builds.py; an older
            # build's or an import's may not be: search then ignores those rows' cosine for readers
            # who may not read the rows they share text with).
            fresh = (
                not Paragraph.objects.filter(collection=collection, embedding__isnull=False)
                .filter(document__built_context__lt=CONTEXT_VERSION)
                .exists()
            )
            path = writer.write(
                collection_root(collection.pk),
                key,
                extra={"collection": collection.pk, "fresh_vectors": fresh, "analyzer": built.analyzer},
                parts=parts,
                ivf=ivf,
            )
            if not keep_others:
                remove_stale(collection_root(collection.pk), keep=key)
            logger.info(
                "index of %s/%s written: %d paragraphs in %.2fs",
                collection.agent.agent_id,
                collection.name,
                writer.rows,
                time.perf_counter() - started,
            )
            return key, path
    raise RuntimeError(f'collection "{collection.name}" kept being rebuilt while its index was written')


def index_before_commit(*, collection: Collection) -> str:
    """Write, verify and store the index of the build being committed, inside its transaction
    (docs/decisions/0038, docs/decisions/0048).

    Called after the build record is written and before the transaction commits, so the rows it reads
    are the new build's. When the index cannot be written whole (a full disk), does not read back with
    every row, or cannot be stored beside the build (services.indexes.store), this raises and the
    transaction rolls back: the build fails and the previous build, whose index is left in place and
    stored, keeps answering. Returns the key to keep once the build commits.
    """
    try:
        written = write_index(collection=collection, keep_others=True, fetch=False)
        if written is None:
            raise IndexUnusable("the build record was not found")
        key, path = written
        rows, read_back = Paragraph.objects.filter(collection=collection).count(), MappedIndex(path).size
        if read_back != rows:
            raise IndexUnusable(f"it reads back {read_back} of {rows} rows")
        started = time.perf_counter()
        size = store.store_files(collection=collection, key=key, folder=path)
        logger.info(
            "index of %s/%s stored beside the build: %d bytes in %.2fs",
            collection.agent.agent_id,
            collection.name,
            size,
            time.perf_counter() - started,
        )
    except (OSError, IndexUnusable, DatabaseError) as exc:
        # Never the file name: INDEX_DIR is a path on this machine.
        reason = (exc.strerror or type(exc).__name__) if isinstance(exc, OSError) else str(exc)
        if isinstance(exc, DatabaseError):
            reason = f"the store refused its files: {type(exc).__name__}"
        raise RagsiteError(
            f'the search index of "{collection.name}" could not be written ({reason}); the build is not used '
            "and the previous one keeps answering",
            code="index_not_written",
        ) from None
    return key


def discard_copy(*, collection_id: int, key: str) -> None:
    """Remove this node's copy of build `key`'s index (one that failed its checksum), under the folder lock;
    the next load fetches it again. A process mapping it keeps reading its mapping."""
    with _collection_lock(collection_id):
        shutil.rmtree(collection_root(collection_id) / key, ignore_errors=True)


def after_commit(*, collection: Collection, key: str) -> None:
    """Once the build that wrote index `key` committed: the older builds' indexes go (under the folder
    lock, so no search of this node is between mapping one and having mapped it)."""
    with _collection_lock(collection.pk):
        remove_stale(collection_root(collection.pk), keep=key)


def index_committed_build(*, collection: Collection) -> None:
    """Write the index of a build that already committed (an import), so no search waits for it.

    Never fails the import: the rows are committed, and a search that finds no usable index
    writes it from them.
    """
    try:
        written = write_index(collection=collection)
        if written is not None:
            store.store_if_missing(collection=collection, key=written[0], folder=written[1])
    except (OSError, RagsiteError, DatabaseError) as exc:
        logger.warning(
            "index of %s/%s not written now (%s); the first search will write it",
            collection.agent.agent_id,
            collection.name,
            getattr(exc, "strerror", None) or exc,
        )


def _usable(path: Path, analyzer: str | None = None) -> bool:
    if not (path / "meta.json").exists():
        return False
    try:
        MappedIndex(path, analyzer=analyzer)
    except IndexUnusable:
        return False
    return True


class Written(NamedTuple):
    """The writers of an index's parts from one read of the rows (`_write_rows`)."""

    main: IndexWriter  # the texts and vectors
    context: IndexWriter
    carried: IndexWriter  # every row's carried opening
    consistent: bool  # the reads of the rows met the same rows (else a build committed between them)
    entries: EntryRows | None  # with ENTRIES, the entries of the rows read (services.indexes.entries)


def _write_rows(
    collection: Collection, built: CollectionBuilt, vectors: BuildVectors | None = None
) -> Written:
    """The index's parts written from the rows (`Written`), with `vectors` read before (here when None).

    Tokenized in INDEX_WRITE_PROCESSES spawned processes when the collection is large; when they
    cannot run (a spawned process imports the program's main module, and a script that does its work
    outside ``if __name__ == "__main__"`` breaks them), in this one."""
    processes = int(settings.INDEX_WRITE_PROCESSES)
    vectors = read_vectors(collection, built, ROWS_PER_BLOCK) if vectors is None else vectors
    try:
        return _rows_into_writers(collection, built, vectors, processes)
    except BrokenProcessPool:
        if processes <= 1:
            raise
        logger.warning(
            "index of %s/%s: its tokenizing processes stopped; tokenizing in this process",
            collection.agent.agent_id,
            collection.name,
        )
        return _rows_into_writers(collection, built, vectors, 1)


def _rows_into_writers(
    collection: Collection, built: CollectionBuilt, vectors: BuildVectors, processes: int
) -> Written:
    writer = IndexWriter(built.dimensions)
    writer.add_vectors(vectors.matrix, vectors.row)
    context = IndexWriter(0)
    carried = IndexWriter(0)
    gathered = entry_rows(collection.pk, built, ROWS_PER_BLOCK)
    # With ENTRIES, each row's entry vectors come with its text: the entries need no read of their own.
    fields = ("id", "document_id", "text", "context") + (("entry_embedding",) if gathered else ())
    rows = Paragraph.objects.filter(collection=collection).order_by("ordinal").values_list(*fields)
    # Each row's carried opening and the first row it shares text with, from the positions alone.
    positions = (
        Paragraph.objects.filter(collection=collection)
        .order_by("ordinal")
        .values_list("document_id", "start_char", "end_char")
    )
    openings = np.fromiter(
        (value for pair in carried_openings(positions.iterator(chunk_size=ROWS_PER_BLOCK)) for value in pair),
        dtype=np.int64,
    ).reshape(-1, 2)
    carried.arrays["carried_from.i32"] = openings[:, 1].astype(np.int32)

    def blocks():
        block, at = [], 0
        for row in rows.iterator(chunk_size=ROWS_PER_BLOCK):
            block.append(row)
            if len(block) >= ROWS_PER_BLOCK:
                yield block, at
                at += len(block)
                block = []
        if block:
            yield block, at

    def jobs():
        """Each block and what tokenizing it takes: texts, contexts, openings' lengths, analyzer name."""
        for block, at in blocks():
            lengths = openings[at : at + len(block), 0].tolist()
            lengths += [0] * (len(block) - len(lengths))  # rows that came since (then written again)
            yield block, ([r[2] for r in block], [r[3] for r in block], lengths, built.analyzer)

    read: list[np.ndarray] = []
    at = 0
    with tokenizers(len(openings), processes, ROWS_PER_BLOCK) as pool:
        for block, (text, contexts, opening) in in_order(pool, row_postings, jobs(), 2 * processes):
            ids, documents = [r[0] for r in block], [r[1] for r in block]
            if gathered is not None:
                for number, (pk, document, row_text, row_context, blob) in enumerate(block, start=at):
                    start = int(openings[number, 0]) if number < len(openings) else 0
                    gathered.add(number, pk, document, row_text, row_context, blob, start)
            at += len(block)
            read.append(np.asarray(ids, dtype=np.int64))
            writer.add_postings(ids, documents, text, None)
            context.add_postings(ids, documents, contexts, None)
            carried.add_postings(ids, documents, opening, None)
    same_rows = np.array_equal(np.concatenate(read) if read else np.zeros(0, np.int64), vectors.ids)
    return Written(writer, context, carried, len(openings) == carried.rows and same_rows, gathered)


def mapped_index(collection: Collection, built: CollectionBuilt) -> tuple[str, MappedIndex]:
    """The mapped index of `built`, from this process's cache, the disk, or fetched from the store (or
    written from the rows when nothing is stored); see `_obtain` for how long a search waits for that.

    Returns the key actually mapped: when a newer build committed meanwhile, its index. No lock other
    collections' searches need is held while an index is fetched or written.
    """
    key = build_key(built)
    cached = _mapped.get(collection.pk)
    if cached is not None and cached[0] == key:
        return cached
    path = collection_root(collection.pk) / key
    try:
        index = MappedIndex(path, analyzer=built.analyzer)
    except IndexUnusable as exc:
        if (path / "meta.json").exists() or path.exists():
            logger.warning(
                "index of %s/%s unusable (%s): fetching it from the store",
                collection.agent.agent_id,
                collection.name,
                exc,
            )
        key, path = _obtain(collection, built, key)
        index = _map_written(collection, key, path)
    with _mapped_lock:
        _mapped[collection.pk] = (key, index)
    return key, index


def _obtain(collection: Collection, built: CollectionBuilt, key: str) -> tuple[str, Path]:
    """The files of `built` put in place for this node: inside this search for a build of at most
    INDEX_LOAD_INLINE_ROWS paragraphs (a fetch of a few MB), else by a background load that this search
    waits for at most INDEX_LOAD_WAIT seconds before answering 503 `index_loading` (index_loading)."""
    try:
        if built.passages <= int(settings.INDEX_LOAD_INLINE_ROWS):
            written = write_index(collection=collection)
        else:
            written = load_in_background(
                collection_id=collection.pk,
                name=collection.name,
                key=key,
                job=lambda: _load_and_share(collection),
                wait=float(settings.INDEX_LOAD_WAIT),
            )
    except OSError as error:
        # Say what failed, never where: INDEX_DIR is a path on this machine.
        logger.error(
            "index of %s/%s cannot be written: %s",
            collection.agent.agent_id,
            collection.name,
            error.strerror or type(error).__name__,
        )
        raise RagsiteError(
            f'the search index of "{collection.name}" cannot be written '
            f"({error.strerror or type(error).__name__}); see INDEX_DIR",
            code="index_unavailable",
            status=503,
        ) from None
    if written is None:
        raise Conflict(f'collection "{collection.name}" has never been built', code="not_built")
    return written


def _load_and_share(collection: Collection) -> tuple[str, Path] | None:
    """A background load: fetch (or write from the rows), and store what was written from the rows so
    the next node fetches it (a build stored before files were, or whose document was deleted since)."""
    written = write_index(collection=collection)
    if written is not None:
        store.store_if_missing(collection=collection, key=written[0], folder=written[1])
    return written


def _fetched(collection: Collection, key: str) -> bool:
    """Whether build `key`'s stored files were fetched and verified into place (indexes.store). A stored copy
    that does not verify is logged, and the caller writes the index from the rows instead."""
    started = time.perf_counter()
    try:
        folder = store.fetch_files(collection_id=collection.pk, key=key, root=collection_root(collection.pk))
    except IndexUnusable as exc:
        logger.warning(
            "stored index of %s/%s unusable (%s): writing it from the rows",
            collection.agent.agent_id,
            collection.name,
            exc,
        )
        return False
    if folder is not None:
        logger.info(
            "index of %s/%s fetched from the store in %.2fs",
            collection.agent.agent_id,
            collection.name,
            time.perf_counter() - started,
        )
    return folder is not None


def _map_written(collection: Collection, key: str, path: Path) -> MappedIndex:
    """Map an index just written (maybe a newer build's: searches use its analyzer); if gone, write again.

    Mapped under the folder lock, which every process removing an index's files holds (`remove_stale`,
    `discard_copy`): once mapped, the files may go, the mapping stays readable. Without the lock a
    process writing a newer build could remove these files between their write and their mapping (seen
    on a busy 2-core machine with three searches and a deleting loop: four lost races in a row).
    """
    for _attempt in range(3):
        with _collection_lock(collection.pk):
            try:
                return MappedIndex(path)
            except IndexUnusable:
                pass
        written = write_index(collection=collection)
        if written is None:
            break
        key, path = written
    with _collection_lock(collection.pk):
        return MappedIndex(path)


def forget(collection_id: int) -> None:
    """Drop this process's mapping of a collection (the files stay)."""
    _mapped.pop(collection_id, None)


__all__ = [
    "after_commit",
    "build_key",
    "collection_root",
    "discard_copy",
    "forget",
    "index_before_commit",
    "index_committed_build",
    "mapped_index",
    "remove_stale",
    "write_index",
]
