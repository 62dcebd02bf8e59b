"""A build's index files stored in the database beside the build, and fetched from there by a node.

The build worker writes the index once (services.indexes) and stores its files here, chunked, inside
the transaction that makes the build live, so a build whose files cannot be stored is not used. A web
node that lacks the files (another machine, a fresh container, a cleaned INDEX_DIR) or finds them
broken fetches them: every chunk read in order, every file checked against its size and SHA-256, the
whole folder opened as an index, then renamed into place — a reader sees a whole index or none. That
costs seconds where writing the index again from the rows cost minutes (docs/decisions/0048).

Only the live build's files are kept: storing a build's deletes every other build's of the collection
in the same transaction. Chunks are CHUNK_BYTES: each statement moves and holds a bounded amount, far
under SQLite's blob limit (1 GB) and PostgreSQL's bytea limit (1 GB).
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import uuid
from pathlib import Path

from django.db import IntegrityError, connection, transaction

from ...index.format import IndexUnusable
from ...index.mapped import MappedIndex
from ...index.writer import _fsync_dir  # the writer's own: a fetched folder lands as a written one
from ...models import Collection, IndexChunk, IndexFile

logger = logging.getLogger("ragsite.search")

# 4 MiB a chunk: ~28 statements for the 100k bench's 115 MB index (about 1.1 KB a paragraph).
CHUNK_BYTES = 4 << 20
_INSERT = "INSERT INTO collection_index_chunk (file_id, agent_id, number, data) VALUES (%s, %s, %s, %b)"
_SELECT = "SELECT data FROM collection_index_chunk WHERE file_id = %s AND number = %s"


def store_files(*, collection: Collection, key: str, folder: Path) -> int:
    """Store the files under `folder` as the index of build `key`, and drop every other build's; the bytes
    stored.

    One transaction (a savepoint inside the build's commit): the files are all there or none is. A few
    statements whatever the build's size, plus one per CHUNK_BYTES: small files' chunks go in together.
    """
    paths = sorted(p for p in folder.rglob("*") if p.is_file())
    agent_id = collection.agent.agent_id
    # No savepoint of its own: inside a build's commit a failure here fails the build, and elsewhere this
    # is the whole transaction.
    with transaction.atomic(savepoint=False):
        IndexFile.objects.filter(collection=collection).delete()  # other builds', and a half of this one's
        records = IndexFile.objects.bulk_create(
            IndexFile(
                collection=collection,
                agent_id=agent_id,
                key=key,
                path=path.relative_to(folder).as_posix(),
                size=0,
                sha256="",
                chunks=0,
            )
            for path in paths
        )
        if not all(record.pk for record in records):  # a backend that returns no ids on bulk insert
            by_path = {r.path: r for r in IndexFile.objects.filter(collection=collection, key=key)}
            records = [by_path[record.path] for record in records]
        pending: list[tuple[IndexFile, int, bytes]] = []
        for record, path in zip(records, paths, strict=True):
            digest, size, number = hashlib.sha256(), 0, 0
            with open(path, "rb") as handle:
                while data := handle.read(CHUNK_BYTES):
                    pending.append((record, number, data))
                    if sum(len(chunk) for _r, _n, chunk in pending) >= CHUNK_BYTES:
                        _insert_chunks(pending)
                    digest.update(data)
                    size += len(data)
                    number += 1
            record.size, record.sha256, record.chunks = size, digest.hexdigest(), number
        _insert_chunks(pending)
        IndexFile.objects.bulk_update(records, ["size", "sha256", "chunks"])
    return sum(record.size for record in records)


def store_if_missing(*, collection: Collection, key: str, folder: Path) -> bool:
    """Store a build's files when nothing is stored for it yet (a build made before files were stored,
    or one whose document was deleted since); whether this call stored them. Never fails its caller:
    another node storing the same build first is as good."""
    if is_stored(collection_id=collection.pk, key=key):
        return False
    try:
        store_files(collection=collection, key=key, folder=folder)
    except (IntegrityError, OSError) as exc:
        logger.info("index of collection %s not stored here (%s)", collection.pk, type(exc).__name__)
        return False
    return True


def is_stored(*, collection_id: int, key: str) -> bool:
    """Whether build `key`'s files are stored whole (meta.json is among them)."""
    return IndexFile.objects.filter(collection_id=collection_id, key=key, path="meta.json").exists()


def stored_bytes(*, collection_id: int, key: str) -> int:
    return sum(IndexFile.objects.filter(collection_id=collection_id, key=key).values_list("size", flat=True))


def fetch_files(*, collection_id: int, key: str, root: Path) -> Path | None:
    """Fetch build `key`'s stored files into `root/key` and verify them; its folder, or None when nothing
    is stored for that build.

    The caller holds the collection's folder lock (services.indexes). Raises IndexUnusable when what is
    stored does not verify (a missing chunk, a size or checksum that differs, files that do not open as
    an index); nothing is left behind then.
    """
    files = list(IndexFile.objects.filter(collection_id=collection_id, key=key).order_by("path"))
    if not any(f.path == "meta.json" for f in files):
        return None
    root.mkdir(parents=True, exist_ok=True)
    scratch = root / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}.fetch"
    try:
        for record in files:
            _fetch_file(record, scratch / record.path)
        MappedIndex(scratch)  # whole and consistent, as a search would open it
        _fsync_dir(scratch)
        final = root / key
        shutil.rmtree(final, ignore_errors=True)  # a broken copy: the lock holder's to replace
        os.rename(scratch, final)
        _fsync_dir(root)
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return final


def _fetch_file(record: IndexFile, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    digest, size = hashlib.sha256(), 0
    with open(target, "wb") as handle:
        # One statement a chunk: a bounded read whatever the file's size, on either database.
        for number in range(record.chunks):
            data = _read_chunk(record, number)
            if data is None:
                raise IndexUnusable(f"chunk {number} of the stored {record.path} is missing")
            digest.update(data)
            handle.write(data)
            size += len(data)
        handle.flush()
        os.fsync(handle.fileno())
    if size != record.size or digest.hexdigest() != record.sha256:
        raise IndexUnusable(f"the stored {record.path} does not match its size and SHA-256")


def _insert_chunks(pending: list[tuple[IndexFile, int, bytes]]) -> None:
    """Insert the pending chunks in one statement, and empty the list."""
    if not pending:
        return
    if connection.vendor != "postgresql":
        IndexChunk.objects.bulk_create(
            IndexChunk(file=record, agent_id=record.agent_id, number=number, data=data)
            for record, number, data in pending
        )
    else:
        # In psycopg's binary format, on the connection (and so the transaction and row-level-security
        # scope) Django uses: its own cursor sends bytea as an escaped literal, 25 MB/s against 159.
        import psycopg

        connection.ensure_connection()
        with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
            cursor.executemany(_INSERT, [[r.pk, r.agent_id, number, data] for r, number, data in pending])
    pending.clear()


def _read_chunk(record: IndexFile, number: int) -> bytes | memoryview | None:
    if connection.vendor != "postgresql":
        return IndexChunk.objects.filter(file=record, number=number).values_list("data", flat=True).first()
    # Binary results: Django's cursor reads bytea as hex text, 124 MB/s against 473 (measured).
    import psycopg

    connection.ensure_connection()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(_SELECT, [record.pk, number], binary=True)
        row = cursor.fetchone()
    return None if row is None else row[0]


def verify_folder(*, collection_id: int, key: str, folder: Path) -> bool | None:
    """Whether the files in `folder` are byte for byte build `key`'s stored ones (size and SHA-256); None
    when nothing is stored to compare with. A full read: for warming a node, not for every search."""
    files = list(IndexFile.objects.filter(collection_id=collection_id, key=key))
    if not any(f.path == "meta.json" for f in files):
        return None
    for record in files:
        path = folder / record.path
        try:
            if path.stat().st_size != record.size or _sha256(path) != record.sha256:
                return False
        except OSError:
            return False
    return True


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while data := handle.read(CHUNK_BYTES):
            digest.update(data)
    return digest.hexdigest()


__all__ = [
    "CHUNK_BYTES",
    "fetch_files",
    "is_stored",
    "store_files",
    "store_if_missing",
    "stored_bytes",
    "verify_folder",
]
