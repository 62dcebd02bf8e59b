"""Writing one build's index files (layout in `index.mapped`): under a temporary name, fsynced, then
renamed into place, so a reader sees a whole index or none.

Pure: numpy only; no models, no settings.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Sequence
from itertools import filterfalse
from pathlib import Path

import numpy as np

from ragsite.lexical import DEFAULT_B, DEFAULT_K1

from .format import ARRAYS, FORMAT, VECTOR_POSITION_FILE, vector_file
from .ivf import IVFLists
from .packed import write_packed
from .postings import BlockPostings, block_postings

# Vectors a pass of the writer converts to float16 and writes (bounds the temporary).
VECTOR_BLOCK = 1 << 16


class IndexWriter:
    """Accumulates rows block by block (so a million paragraphs never sit in memory as Python objects).

    Call :meth:`add` with consecutive blocks of rows in ordinal order, then :meth:`write`.
    """

    def __init__(self, dimensions: int, *, k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> None:
        self.dimensions, self.k1, self.b = int(dimensions), float(k1), float(b)
        # Held as float32 while writing (the IVF's k-means reads them so); written as float16.
        self.vector_dtype = np.dtype(np.float32)
        self.vocabulary: dict[str, int] = {}  # term -> id in order of first sight
        self._paragraph: list[np.ndarray] = []
        self._document: list[np.ndarray] = []
        self._doc_len: list[np.ndarray] = []
        self._post_term: list[np.ndarray] = []
        self._post_doc: list[np.ndarray] = []
        self._post_tf: list[np.ndarray] = []
        self._vectors: list[np.ndarray] = []
        self._vector_row: list[np.ndarray] = []
        self.arrays: dict[str, np.ndarray] = {}  # further per-row files of this field, by file name
        self.rows = 0

    def add(
        self,
        paragraph_ids: Sequence[int],
        document_ids: Sequence[int],
        term_lists: Sequence[Sequence[str]],
        vectors: Sequence[np.ndarray | None],
    ) -> None:
        """One block: per row its ids, its terms (``lexical.terms``) and its (windows, d) vectors or None."""
        self.add_postings(paragraph_ids, document_ids, block_postings(term_lists), vectors)

    def add_postings(
        self,
        paragraph_ids: Sequence[int],
        document_ids: Sequence[int],
        postings: BlockPostings,
        vectors: Sequence[np.ndarray | None] | None,
    ) -> None:
        """One block whose terms are already postings (`postings.block_postings`, perhaps made in another
        process): its block-local term ids are mapped onto this writer's vocabulary, one step a term.
        ``vectors``: each row's, or None when they come through `add_vectors`."""
        count = len(paragraph_ids)
        first = self.rows
        self._paragraph.append(np.asarray(paragraph_ids, dtype=np.int64))
        self._document.append(np.asarray(document_ids, dtype=np.int64))
        self._doc_len.append(postings.lengths.astype(np.int32))
        if postings.vocabulary:
            # The block's new terms numbered next, in the block's order; then every block term's number.
            # Both passes are C loops (a generator of setdefault calls cost ~25 µs a row at 100k).
            vocabulary = self.vocabulary
            new = list(filterfalse(vocabulary.__contains__, postings.vocabulary))
            vocabulary.update(zip(new, range(len(vocabulary), len(vocabulary) + len(new)), strict=True))
            block = postings.vocabulary
            to_global = np.fromiter(map(vocabulary.__getitem__, block), dtype=np.int64, count=len(block))
            # Sorted by (block term, row); the write sorts by global term, stably, so rows stay ascending.
            self._post_term.append(to_global[postings.term])
            self._post_doc.append(postings.doc + np.int32(first))
            self._post_tf.append(postings.tf)
        # The block's vectors as one array and their rows as another (not two small arrays a row).
        rows = (
            []
            if vectors is None
            else [offset for offset, windows in enumerate(vectors) if windows is not None]
        )
        if rows:
            shaped = [np.asarray(vectors[i], dtype=np.float32).reshape(-1, self.dimensions) for i in rows]
            self._vectors.append(np.concatenate(shaped).astype(self.vector_dtype, copy=False))
            windows = np.fromiter((block.shape[0] for block in shaped), dtype=np.int64, count=len(rows))
            self._vector_row.append(np.repeat(np.asarray(rows, dtype=np.int32) + np.int32(first), windows))
        self.rows += count

    def add_vectors(self, vectors: np.ndarray, rows: np.ndarray) -> None:
        """Vectors of rows added (or to be added) through `add_postings` without theirs: ``vectors`` (n, d),
        each row's windows consecutive and rows ascending, and ``rows`` each one's row."""
        if vectors.shape[0]:
            self._vectors.append(np.asarray(vectors, dtype=self.vector_dtype).reshape(-1, self.dimensions))
            self._vector_row.append(np.asarray(rows, dtype=np.int32))

    def matrix(self) -> np.ndarray:
        """Every vector added, as one (n, d) array of `vector_dtype` (concatenated once, then kept)."""
        if len(self._vectors) != 1:
            empty = np.zeros((0, self.dimensions), self.vector_dtype)
            self._vectors = [np.concatenate(self._vectors) if self._vectors else empty]
        return self._vectors[0]

    def write(
        self,
        root: Path,
        key: str,
        *,
        extra: dict | None = None,
        parts: dict[str, IndexWriter] | None = None,
        ivf: IVFLists | None = None,
    ) -> Path:
        """Write the index as ``root/key`` (temporary directory, then one rename); returns the path.

        When another process renamed the same build into place first, its index is kept and ours
        dropped: both were made from the same rows.
        """
        root.mkdir(parents=True, exist_ok=True)
        final = root / key
        scratch = root / f".{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
        scratch.mkdir()
        try:
            meta = self._write_files(scratch, extra or {}, ivf)
            if ivf is not None:
                # The IVF lists over these vectors (ivf.build_lists), so no search process builds them;
                # the vectors file is in their order (a probe reads each list as one block).
                for name, array in ivf.arrays().items():
                    _write_array(scratch / f"{name}.bin", array)
                meta["ivf"] = ivf.meta()
            # Further lexical fields over the same rows (a paragraph's context), each in a folder
            # of its own, inside the same rename.
            for name, part in (parts or {}).items():
                (scratch / name).mkdir()
                part_meta = part._write_files(scratch / name, {})
                (scratch / name / "meta.json").write_text(json.dumps(part_meta, sort_keys=True))
            meta["parts"] = sorted(parts or {})  # so a load never mistakes a part deleted under it for none
            (scratch / "meta.json").write_text(json.dumps(meta, sort_keys=True))
            _fsync_dir(scratch)
            try:
                os.rename(scratch, final)
            except OSError:
                if not (final / "meta.json").exists():
                    raise
                shutil.rmtree(scratch, ignore_errors=True)
            _fsync_dir(root)
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        return final

    def _write_files(self, directory: Path, extra: dict, ivf: IVFLists | None = None) -> dict:
        empty_i8 = np.zeros(0, dtype=np.int64)
        vocabulary = list(self.vocabulary)
        order = sorted(range(len(vocabulary)), key=vocabulary.__getitem__)  # code point = UTF-8 byte order
        rank = np.empty(len(vocabulary), dtype=np.int64)
        rank[np.asarray(order, dtype=np.int64)] = np.arange(len(vocabulary), dtype=np.int64)
        post_term = rank[np.concatenate(self._post_term)] if self._post_term else empty_i8
        # Blocks are in row order and each block's postings are sorted by (term, row), so a stable
        # sort by term leaves each term's rows ascending, as seed 004 requires.
        by_term = np.argsort(post_term, kind="stable")
        postings_doc = np.concatenate(self._post_doc)[by_term] if self._post_doc else np.zeros(0, np.int32)
        postings_tf = np.concatenate(self._post_tf)[by_term] if self._post_tf else np.zeros(0, np.int32)
        indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(np.bincount(post_term, minlength=len(vocabulary)), out=indptr[1:])
        del by_term, post_term
        encoded = [vocabulary[i].encode("utf-8") for i in order]
        offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
        np.cumsum([len(e) for e in encoded], out=offsets[1:])
        doc_len = np.concatenate(self._doc_len) if self._doc_len else np.zeros(0, np.int32)
        vectors = self.matrix()
        arrays = {
            "row_paragraph": np.concatenate(self._paragraph) if self._paragraph else empty_i8,
            "row_document": np.concatenate(self._document) if self._document else empty_i8,
            "vector_row": np.concatenate(self._vector_row) if self._vector_row else np.zeros(0, np.int32),
            "doc_len": doc_len,
            "indptr": indptr,
            "vocab_offsets": offsets,
        }
        for name, (filename, dtype) in ARRAYS.items():
            _write_array(directory / filename, arrays[name].astype(dtype, copy=False))
        packed = write_packed(directory, indptr, postings_doc, postings_tf)
        del postings_doc, postings_tf
        # One copy of the vectors: float16 (the store's own values) in the IVF lists' order when there are
        # lists, with each vector's position in it; else float32 in vector order (format.FLAT_VECTOR_DTYPE).
        listed = None if ivf is None else np.asarray(ivf.members)
        dtype, filename = vector_file(listed is not None)
        with open(directory / filename, "wb") as handle:
            for start in range(0, vectors.shape[0], VECTOR_BLOCK):
                stop = start + VECTOR_BLOCK
                ids = slice(start, stop) if listed is None else listed[start:stop]
                vectors[ids].astype(dtype).tofile(handle)
            handle.flush()
            os.fsync(handle.fileno())
        if listed is not None:
            position = np.empty(listed.size, dtype="<i4")
            position[listed] = np.arange(listed.size, dtype="<i4")
            _write_array(directory / VECTOR_POSITION_FILE, position)
        for filename, array in self.arrays.items():
            _write_array(directory / filename, array)
        with open(directory / "vocab.bin", "wb") as handle:
            handle.write(b"".join(encoded))
            handle.flush()
            os.fsync(handle.fileno())
        return {
            **extra,
            **packed,
            "format": FORMAT,
            "rows": self.rows,
            "vectors": int(vectors.shape[0]),
            "dimensions": self.dimensions,
            "vector_dtype": dtype.str,
            "vectors_ordered": listed is not None,
            "terms": len(vocabulary),
            "postings": int(indptr[-1]),
            "vocab_bytes": int(offsets[-1]),
            "doc_len_sum": int(doc_len.sum(dtype=np.int64)),
            "k1": self.k1,
            "b": self.b,
        }


def _write_array(path: Path, array: np.ndarray) -> None:
    with open(path, "wb") as handle:
        np.ascontiguousarray(array).tofile(handle)
        handle.flush()
        os.fsync(handle.fileno())


def _fsync_dir(path: Path) -> None:
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


__all__ = ["IndexWriter"]
