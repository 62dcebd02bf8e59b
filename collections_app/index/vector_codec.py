"""How a paragraph's vectors are stored: float16, little-endian, one or more windows per paragraph.

A paragraph whose text is longer than the embedding model's token window is embedded as several
overlapping windows (see ``services.builds``); its stored ``embedding`` is those windows' vectors
one after the other, so a paragraph that fits holds exactly one. The width comes from the build
record (``CollectionBuilt.dimensions``), never from the blob, so the blob needs no header.

float16 halves the storage of float32 (768 bytes at 384 dimensions). Unit vectors lose about
three decimal digits: every component is below 1 in magnitude, where float16 keeps 11
significant bits, so a cosine moves by about 1e-3 at most. Scores are always computed in
float32 after decoding. Measured on SciFact in docs/decisions/0009.

Pure: numpy, and NumKong for the float16 products (`half_products`).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numkong
import numpy as np

STORED_DTYPE = np.dtype("<f2")


class VectorFormatError(ValueError):
    """A stored blob is not a whole number of vectors of the expected width."""


def encode(vectors: np.ndarray) -> bytes:
    """One vector (d,) or a paragraph's windows (k, d) as stored bytes."""
    return np.ascontiguousarray(vectors, dtype=STORED_DTYPE).tobytes()


def window_count(blob: bytes | memoryview, dimensions: int) -> int:
    """How many vectors a stored blob holds; raises when it is not a whole number of them."""
    width = dimensions * STORED_DTYPE.itemsize
    if dimensions <= 0 or len(blob) == 0 or len(blob) % width:
        raise VectorFormatError(
            f"a stored vector of {len(blob)} bytes is not a multiple of {dimensions} float16"
        )
    return len(blob) // width


def decode(blob: bytes | memoryview, dimensions: int) -> np.ndarray:
    """A stored blob as a (windows, dimensions) float32 matrix."""
    count = window_count(blob, dimensions)
    return np.frombuffer(bytes(blob), dtype=STORED_DTYPE).astype(np.float32).reshape(count, dimensions)


class HalfQuery:
    """A float32 question prepared for `half_products`: its two float16 parts, packed for NumKong.

    The stored vectors are float16 and NumKong multiplies float16 by float16 (widening both to float32
    inside its kernel, accumulating in float32), so the question is split: ``high`` is it scaled by
    2**shift and rounded to float16, ``low`` the rest rounded again; high + low holds 22 of its 24 bits,
    and the shift keeps both parts clear of float16's overflow and most of its subnormals. One product
    of each part, added in float64 and scaled back, is within about float32's own rounding of the exact
    product (the bound is stated and checked in tests/collections/test_half_products.py).

    A search prepares its question once (`half_query`) and hands this down to every product it takes
    (the probe, the candidates, the exact scan); ``vector`` is the question itself, as float32, for
    what is not a float16 product (the lists' centroids, float32 vectors).
    """

    __slots__ = ("packed", "unscale", "vector")

    def __init__(self, query: np.ndarray):
        self.vector = vector = np.asarray(query, dtype=np.float32).ravel()
        largest = float(max(np.maximum.reduce(vector), -np.minimum.reduce(vector))) if vector.size else 0.0
        # The largest component lands in [2**13, 2**14): float16's largest finite value is 65504.
        shift = 13 - math.floor(math.log2(largest)) if 0.0 < largest < math.inf else 0
        # Widened and scaled in one pass: a float32 times a power of two is exact in float64 (as ldexp).
        scaled = np.multiply(vector, math.ldexp(1.0, shift), dtype=np.float64)
        parts = np.empty((2, vector.size), dtype=np.float16)
        parts[0] = scaled  # rounded to float16 as astype rounds
        # The rest (float16 widens to float64 exactly), rounded again, with no float64 temporary.
        np.subtract(scaled, parts[0], out=parts[1], casting="unsafe")
        self.packed = numkong.dots_pack(parts, dtype="f16")
        self.unscale = math.ldexp(1.0, -shift)


def half_query(query: np.ndarray | HalfQuery) -> HalfQuery:
    """``query`` (a vector, (d,)) prepared for `half_products`; one already prepared as it is. A search
    prepares its question once (13 us warm, ~0.1 ms with the caches cold) and passes it down."""
    return query if isinstance(query, HalfQuery) else HalfQuery(query)


def question_vector(query: np.ndarray | HalfQuery) -> np.ndarray:
    """The float32 question of ``query``, prepared or not."""
    return query.vector if isinstance(query, HalfQuery) else np.asarray(query, dtype=np.float32)


def half_products(block: np.ndarray, query: HalfQuery) -> np.ndarray:
    """``block`` (float16, (n, d)) times the question (float32, (n,)), without widening the block first.

    NumKong's packed product reads each float16 row once for both parts of the question (a list of
    316 x 384 here: about half the time of widening it to float32 and numpy's product, docs/decisions/
    0095). A row's product does not depend on the rows around it (tests/collections/test_half_products.py),
    so a list scanned whole, a gather of some rows and a scan of every row give each row the same bits,
    and the approximate path's candidates are scored as the exact path scores them."""
    block = np.asarray(block)
    if block.shape[0] == 0:
        return np.zeros(0, dtype=np.float32)
    return _combined(np.asarray(numkong.dots_packed(block, query.packed)), query)


def half_products_of_spans(matrix: np.ndarray, spans: list[tuple[int, int]], query: HalfQuery) -> np.ndarray:
    """`half_products` of the rows ``matrix[lo:hi]`` of each span, one after the other: each span's parts
    written into one buffer and combined once (the same bits as a call a span: the combination is
    row by row), rather than four numpy passes and an allocation a span (an IVF probe's ten lists)."""
    total = sum(hi - lo for lo, hi in spans)
    if total == 0:
        return np.zeros(0, dtype=np.float32)
    parts = numkong.empty((total, 2), dtype="float32")
    at = 0
    for lo, hi in spans:
        if hi > lo:
            numkong.dots_packed(matrix[lo:hi], query.packed, out=parts[at : at + hi - lo])
            at += hi - lo
    return _combined(np.asarray(parts), query)


def _combined(parts: np.ndarray, query: HalfQuery) -> np.ndarray:
    """The two parts' products (n, 2) added in float64, scaled back and rounded to float32 (the scaling
    in float64, then one rounding, as the output's cast)."""
    both = np.add.reduce(parts, axis=1, dtype=np.float64)  # each row's part 0 + part 1
    return np.multiply(both, query.unscale, out=np.empty(both.size, dtype=np.float32), casting="unsafe")


def reused(
    known: tuple[np.ndarray, np.ndarray] | None, ids: np.ndarray, take: Callable[[np.ndarray], np.ndarray]
) -> np.ndarray:
    """The products of ``ids``: those in ``known`` (ids ascending, their products) as they are, the rest
    from ``take(missing ids)``. A row's product does not depend on the rows taken with it
    (`half_products`), so a probe's product is the bits a gather would give: not read twice."""
    if known is None or known[0].size == 0:
        return take(ids)
    if ids is known[0]:  # the probe's own rows (a vector search's candidates): nothing to look up, and
        return known[1]  # the products are the caller's from here on (the probe reads them no more)
    at = np.minimum(np.searchsorted(known[0], ids), known[0].size - 1)
    found = known[0][at] == ids
    if found.all():
        return known[1][at]
    products = np.empty(ids.size, dtype=np.float32)
    products[found] = known[1][at[found]]
    products[~found] = take(ids[~found])
    return products


def first_window(blob: bytes | memoryview, dimensions: int) -> np.ndarray:
    """The paragraph's first window as float32 (d,): what a one-vector reader gets (see
    docs/interchange.md)."""
    return decode(blob, dimensions)[0]


__all__ = [
    "STORED_DTYPE",
    "VectorFormatError",
    "decode",
    "encode",
    "first_window",
    "HalfQuery",
    "half_products",
    "half_products_of_spans",
    "half_query",
    "question_vector",
    "reused",
    "window_count",
]
