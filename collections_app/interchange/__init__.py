"""The ``rag/<index_id>/`` interchange format of seed 004: meta.json, docs.jsonl, vectors.f32, bm25.idx.

Pure: no models, no settings. :func:`write_index` and :func:`read_index` move a whole index between
a directory and a :class:`RagIndex`; the ``encode_*`` / ``decode_*`` pairs do the same for one file's
bytes, so each file can be tested on its own. All integers are little-endian.

Every writer here is canonical: decoding a file this module wrote and encoding the result gives the
same bytes. ``bm25.idx`` is never taken on trust: it is what :class:`~.lexical.BM25Index` builds from
the chunk texts with :func:`~.lexical.terms`, so a reader recomputes it from ``docs.jsonl`` and
compares (:func:`read_index` does).

A file that breaks the format raises :class:`InterchangeError`, naming the file, the field and,
for docs.jsonl, the line.

The package keeps the files apart: `files` (the records, the error, meta.json, docs.jsonl,
vectors.f32), `bm25` (bm25.idx) and `directory` (the whole index). Every public name is reachable
from here, as ``collections_app.interchange.X``, the way its callers and tests use it.
"""

from .bm25 import decode_bm25, encode_bm25
from .directory import build_index, decode_index, encode_index, read_files, read_index, write_index
from .files import (
    AVGDL_RELATIVE_TOLERANCE,
    BM25,
    DOCS,
    FILES,
    MAGIC,
    META,
    SOURCE,
    UNIT_TOLERANCE,
    VECTORS,
    VERSION,
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
    fingerprint,
)

__all__ = [
    "AVGDL_RELATIVE_TOLERANCE",
    "BM25",
    "DOCS",
    "FILES",
    "MAGIC",
    "META",
    "SOURCE",
    "UNIT_TOLERANCE",
    "VECTORS",
    "VERSION",
    "Chunk",
    "InterchangeError",
    "Meta",
    "RagIndex",
    "build_index",
    "check_unit_rows",
    "decode_bm25",
    "decode_docs",
    "decode_index",
    "decode_meta",
    "decode_vectors",
    "encode_bm25",
    "encode_docs",
    "encode_index",
    "encode_meta",
    "encode_vectors",
    "fingerprint",
    "read_files",
    "read_index",
    "write_index",
]
