"""The files of one build's index: the format version, the per-row array files, and the BM25 weight
both the writer and a reader's view compute. The layout itself is described in `index.mapped`.

Pure: numpy only; no models, no settings.
"""

from __future__ import annotations

import numpy as np

# 2: the carried openings (a format-1 index on disk is rewritten from the rows on first use).
FORMAT = 2
# The index keeps the store's float16 values widened to float32: numpy widens float16 at about
# 20 ns an element (no BLAS, no F16C path), 18× the cost of the float32 product itself — 95 ms
# against 4 ms for a flat scan of 10,000 × 384 (docs/decisions/0009). The values are the float16
# ones, so scores equal a float16 index's; the file costs 1.5 KB a paragraph of page cache, shared
# by every worker, while the store keeps 768 B. A float16 index can still be written (vector_dtype).
VECTOR_DTYPE = np.dtype("<f4")
ARRAYS = {
    "row_paragraph": ("row_paragraph.i64", "<i8"),
    "row_document": ("row_document.i64", "<i8"),
    "vector_row": ("vector_row.i32", "<i4"),
    "doc_len": ("doc_len.i32", "<i4"),
    "indptr": ("indptr.i64", "<i8"),
    "postings_doc": ("postings_doc.i32", "<i4"),
    "postings_tf": ("postings_tf.i32", "<i4"),
    "vocab_offsets": ("vocab_offsets.i64", "<i8"),
}


class IndexUnusable(Exception):
    """The files of an index are missing, incomplete or inconsistent: rebuild it from the rows."""


def bm25_weights(tf: np.ndarray, dl: np.ndarray, k1: float, b: float, avgdl: float) -> np.ndarray:
    """``tf (k1 + 1) / (tf + k1 (1 - b + b dl / avgdl))`` per posting, in float64.

    The order of operations of ``lexical.BM25Index._posting_weights``, so written and on-the-fly
    weights are bit for bit the seed's.
    """
    # In place, one operation at a time in the seed's order: the temporaries of the plain
    # expression were a third of a reader view's scoring time (22.8 -> 15.4 ms, 100k rows).
    weights = np.asarray(tf).astype(np.float64)
    denominator = np.asarray(dl).astype(np.float64)
    denominator *= b
    denominator /= avgdl
    denominator += 1 - b
    denominator *= k1
    denominator += weights
    weights *= k1 + 1
    weights /= denominator
    return weights


__all__ = ["ARRAYS", "FORMAT", "VECTOR_DTYPE", "IndexUnusable", "bm25_weights"]
