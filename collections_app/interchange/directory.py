"""A whole index: its four files' bytes, built from chunks, written to a directory and read back."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ragsite.lexical import BM25Index

from .bm25 import _compare_bm25, decode_bm25, encode_bm25
from .files import (
    BM25,
    DOCS,
    FILES,
    META,
    VECTORS,
    Chunk,
    InterchangeError,
    Meta,
    RagIndex,
    check_unit_rows,
    decode_docs,
    decode_meta,
    decode_vectors,
    encode_docs,
    encode_meta,
    encode_vectors,
)

# --- the whole index -------------------------------------------------------------


def encode_index(index: RagIndex) -> dict[str, bytes]:
    """The four files' bytes, by file name."""
    return {
        META: encode_meta(index.meta),
        DOCS: encode_docs(index.chunks),
        VECTORS: encode_vectors(index.vectors),
        BM25: encode_bm25(index.bm25),
    }


def build_index(
    *, meta: Meta, chunks: list[Chunk], vectors: np.ndarray, bm25: BM25Index | None = None
) -> RagIndex:
    """An index from chunks and their vectors; bm25.idx is built from the chunk texts unless `bm25`
    (postings of exactly these chunks, in order, e.g. from the build's search index) is given."""
    vectors = np.asarray(vectors, dtype=np.float32).reshape(len(chunks), meta.dim)
    if meta.n_chunks != len(chunks):
        raise InterchangeError(META, "n_chunks", f"{meta.n_chunks}, but there are {len(chunks)} chunks")
    # Write nothing a reader would refuse: every chunk_id must resolve as decode_docs checks it.
    seen: dict[str, int] = {}
    for line, item in enumerate(chunks, start=1):
        k = seen.get(item.doc_id, 0)
        if item.k != k:
            raise InterchangeError(
                DOCS, "chunk_id", f'"{item.chunk_id[:200]}" should be chunk {k} of its document', line=line
            )
        seen[item.doc_id] = k + 1
    check_unit_rows(vectors)
    if bm25 is None:
        bm25 = BM25Index.from_texts((c.text for c in chunks), k1=meta.k1, b=meta.b)
    elif bm25.n_docs != len(chunks) or (bm25.k1, bm25.b) != (meta.k1, meta.b):
        raise ValueError("the BM25 postings given are not those of these chunks")
    return RagIndex(meta=meta, chunks=chunks, vectors=vectors, bm25=bm25)


def write_index(root: Path, index: RagIndex) -> Path:
    """Write ``root/rag/<index_id>/`` and return that directory. Files are written whole, then renamed.

    A file whose bytes are already there is left alone (seed 004, ag.06: re-writing an unchanged
    index writes nothing), so its modification time says when it last changed.
    """
    target = Path(root) / "rag" / index.meta.index_id
    target.mkdir(parents=True, exist_ok=True)
    for name, data in encode_index(index).items():
        existing = target / name
        if existing.is_file() and existing.stat().st_size == len(data) and existing.read_bytes() == data:
            continue
        partial = target / f".{name}.partial"
        partial.write_bytes(data)
        partial.replace(target / name)
    return target


def read_files(directory: Path) -> dict[str, bytes]:
    files = {}
    for name in FILES:
        path = Path(directory) / name
        try:
            files[name] = path.read_bytes()
        except FileNotFoundError:
            raise InterchangeError(name, "(file)", "missing") from None
        except OSError as exc:
            raise InterchangeError(
                name, "(file)", f"unreadable ({exc.strerror or type(exc).__name__})"
            ) from None
    return files


def decode_index(files: dict[str, bytes], *, index_id: str | None = None) -> RagIndex:
    """Decode the four files and check them against each other.

    meta.json's index_id is the directory's name when given; docs.jsonl has n_chunks lines;
    vectors.f32 is n_chunks x dim; bm25.idx is exactly what the texts give.
    """
    meta = decode_meta(files[META])
    if index_id is not None and meta.index_id != index_id:
        raise InterchangeError(META, "index_id", f'"{meta.index_id}", but the directory is "{index_id}"')
    chunks = decode_docs(files[DOCS])
    if len(chunks) != meta.n_chunks:
        raise InterchangeError(
            DOCS, "(lines)", f"{len(chunks)} chunks, but meta.json says n_chunks = {meta.n_chunks}"
        )
    vectors = decode_vectors(files[VECTORS], n_chunks=meta.n_chunks, dim=meta.dim)
    rebuilt = BM25Index.from_texts((c.text for c in chunks), k1=meta.k1, b=meta.b)
    # n_chunks lines were just checked, so the texts' index has n_chunks documents.
    stored = decode_bm25(files[BM25], k1=meta.k1, b=meta.b, expected=rebuilt)
    _compare_bm25(stored, rebuilt)
    return RagIndex(meta=meta, chunks=chunks, vectors=vectors, bm25=rebuilt)


def read_index(directory: Path, *, index_id: str | None = None) -> RagIndex:
    """Read and check ``directory`` (a ``rag/<index_id>/``); nothing is returned unless all four files
    agree."""
    return decode_index(read_files(directory), index_id=index_id)


__all__ = ["build_index", "decode_index", "encode_index", "read_files", "read_index", "write_index"]
