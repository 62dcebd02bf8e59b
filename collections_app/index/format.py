"""The files of one build's index: the format version, the per-row array files, and the BM25 weight
both the writer and a reader's view compute. The layout itself is described in `index.mapped`.

Pure: numpy only; no models, no settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

# 2: the carried openings. 3: postings packed (index.packed), no written weights, one float16 copy of the
# vectors in the IVF lists' order. An index of another format is refused (IndexUnusable) and written
# again, or fetched, whole: a node never serves a mix of formats.
FORMAT = 3
# The store's own float16 values, once, in the IVF lists' order, when the build has lists: 768 B a vector
# at 384 dimensions where the two float32 copies (row order and list order) cost 3 KB. A probed list is
# multiplied as float16 (vector_codec.half_products), about 1.4x numpy's product over float32.
VECTOR_DTYPE = np.dtype("<f2")
VECTOR_FILE = "vectors.f16"
# With IVF lists: each vector's position in VECTOR_FILE.
VECTOR_POSITION_FILE = "vector_at.i32"
# Without lists (under IVF_MIN_PARAGRAPHS, where every search scans every vector) the same values widened
# once, in vector order: a scan of float16 blocks cost 42-76 ms of CPU at 100,000 x 384 against 11-17 for
# float32 (docs/decisions/0070-compact-index.md).
FLAT_VECTOR_DTYPE = np.dtype("<f4")
FLAT_VECTOR_FILE = "vectors.f32"


def vector_file(ordered: bool) -> tuple[np.dtype, str]:
    """The vectors' type and file: float16 in the IVF lists' order, or float32 in vector order."""
    return (VECTOR_DTYPE, VECTOR_FILE) if ordered else (FLAT_VECTOR_DTYPE, FLAT_VECTOR_FILE)


ARRAYS = {
    "row_paragraph": ("row_paragraph.i64", "<i8"),
    "row_document": ("row_document.i64", "<i8"),
    "vector_row": ("vector_row.i32", "<i4"),
    "doc_len": ("doc_len.i32", "<i4"),
    "indptr": ("indptr.i64", "<i8"),
    "vocab_offsets": ("vocab_offsets.i64", "<i8"),
}


class IndexUnusable(Exception):
    """The files of an index are missing, incomplete or inconsistent: rebuild it from the rows."""


def bm25_norms(dl: np.ndarray, k1: float, b: float, avgdl: float) -> np.ndarray:
    """``k1 (1 - b + b dl / avgdl)`` per row, in float64: the part of BM25's denominator that depends on
    the row alone, in the order of operations of ``lexical.BM25Index._posting_weights``."""
    # In place, one operation at a time in the seed's order: the temporaries of the plain
    # expression were a third of a reader view's scoring time (22.8 -> 15.4 ms, 100k rows).
    norms = np.asarray(dl).astype(np.float64)
    norms *= b
    norms /= avgdl
    norms += 1 - b
    norms *= k1
    return norms


def weights_of(tf: np.ndarray, norms: np.ndarray, k1: float) -> np.ndarray:
    """``tf (k1 + 1) / (tf + norm)`` per posting, ``norms`` being each posting's row's `bm25_norms`: the
    seed's operations in its order, so the same bits as ``lexical.BM25Index``'s weights."""
    weights = np.asarray(tf).astype(np.float64)
    denominator = norms + weights
    weights *= k1 + 1
    weights /= denominator
    return weights


def bm25_weights(tf: np.ndarray, dl: np.ndarray, k1: float, b: float, avgdl: float) -> np.ndarray:
    """``tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))`` per posting, in float64 (the seed's bits)."""
    return weights_of(tf, bm25_norms(dl, k1, b, avgdl), k1)


__all__ = [
    "ARRAYS",
    "FORMAT",
    "VECTOR_DTYPE",
    "VECTOR_FILE",
    "VECTOR_POSITION_FILE",
    "FLAT_VECTOR_DTYPE",
    "FLAT_VECTOR_FILE",
    "IndexUnusable",
    "bm25_norms",
    "bm25_weights",
    "vector_file",
    "weights_of",
]


def map_exact(path: Path, dtype, count: int, shape=None) -> np.ndarray:
    """A read-only map of ``count`` items; the file must hold exactly that many bytes."""
    dtype = np.dtype(dtype)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise IndexUnusable(f"{path.name} is missing") from exc
    if size != count * dtype.itemsize:
        raise IndexUnusable(f"{path.name} holds {size} bytes, expected {count * dtype.itemsize}")
    if count == 0:  # mmap cannot map an empty file
        return np.zeros(shape or (0,), dtype=dtype)
    # A plain ndarray over the same mapping: slicing a np.memmap builds a memmap object each time,
    # which made the vocabulary's binary search cost more than the scoring.
    try:
        return np.memmap(path, dtype=dtype, mode="r", shape=shape or (count,)).view(np.ndarray)
    except (OSError, ValueError) as exc:  # removed or cut short between the stat and the map
        raise IndexUnusable(f"{path.name} could not be mapped") from exc


@dataclass(frozen=True)
class View:
    """BM25 statistics of a subset of rows: N, the sum of their lengths, and the membership mask."""

    mask: np.ndarray | None  # None: every row
    n_docs: int
    length_sum: int
    # Rows scored on their text less their carried opening (their terms and length less its own),
    # because an earlier row they share it with is outside the view; None: none.
    cut: np.ndarray | None = None
    doc_len: np.ndarray | None = None  # with cut rows: every row's length, the cut ones' less their openings

    @property
    def avgdl(self) -> float:
        # Summed as integers and divided once, as lexical.BM25Index does: exact up to one rounding.
        return self.length_sum / self.n_docs if self.n_docs else 0.0
