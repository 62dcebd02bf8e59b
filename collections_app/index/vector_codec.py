"""How a paragraph's vectors are stored: float16, little-endian, one or more windows per paragraph.

A paragraph whose text is longer than the embedding model's token window is embedded as several
overlapping windows (see ``services.builds``); its stored ``embedding`` is those windows' vectors
one after the other, so a paragraph that fits holds exactly one. The width comes from the build
record (``CollectionBuilt.dimensions``), never from the blob, so the blob needs no header.

float16 halves the storage of float32 (768 bytes at 384 dimensions). Unit vectors lose about
three decimal digits: every component is below 1 in magnitude, where float16 keeps 11
significant bits, so a cosine moves by about 1e-3 at most. Scores are always computed in
float32 after decoding. Measured on SciFact in docs/decisions/0009.

Pure: numpy only.
"""

from __future__ import annotations

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


# A float16's bits, sign-extended to 32 and moved left 13, are the float32 of the same value times 2**-112
# once the three bits the sign extension leaves above the exponent are cleared (this mask); the query is
# scaled by 2**112 instead, exactly (a power of two), so each product and sum is the same real number and
# the same bits as widening with astype. Three integer passes cost a third of numpy's float16 cast here
# (0.58 against 1.72 ms for ten lists of 316 x 384). Finite values only: a float16 inf would read as 2**16.
_HALF_MASK = np.int32(-1879048193)  # 0x8FFFFFFF
_HALF_SCALE = np.float32(2.0**112)
# A query component at or past this would overflow once scaled: such a query takes numpy's cast.
_HALF_QUERY_LIMIT = 2.0**14


def half_query(query: np.ndarray) -> np.ndarray | None:
    """``query`` (float32) scaled for `half_products`, or None when scaling it could overflow."""
    query = np.asarray(query, dtype=np.float32)
    if query.size and not float(np.max(np.abs(query))) < _HALF_QUERY_LIMIT:
        return None
    return query * _HALF_SCALE


def half_buffer(rows: int, dimensions: int) -> np.ndarray:
    """Room for `half_products` to widen up to ``rows`` vectors into, reused block after block: a fresh
    array a block cost as much again in page faults (a list of 316 x 384 is 485 KB)."""
    return np.empty(rows * dimensions, dtype=np.int32)


def half_products(
    block: np.ndarray, query: np.ndarray, scaled: np.ndarray | None, buffer: np.ndarray | None = None
) -> np.ndarray:
    """``block`` (float16, (n, d)) times ``query`` in float32, the same bits as ``block.astype(float32) @
    query``; ``scaled`` is `half_query(query)` (None: the plain cast); ``buffer`` a `half_buffer` of at
    least n rows, or None."""
    if scaled is None:
        return np.asarray(block, dtype=np.float32) @ query
    halves = np.ascontiguousarray(block).view(np.int16)
    if buffer is None or buffer.size < halves.size:
        buffer = np.empty(halves.size, dtype=np.int32)
    bits = buffer[: halves.size].reshape(halves.shape)
    np.copyto(bits, halves)  # sign-extending
    bits <<= 13
    bits &= _HALF_MASK
    return bits.view(np.float32) @ scaled


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
    "half_buffer",
    "half_products",
    "half_query",
    "window_count",
]
