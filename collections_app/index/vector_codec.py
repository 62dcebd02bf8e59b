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


def first_window(blob: bytes | memoryview, dimensions: int) -> np.ndarray:
    """The paragraph's first window as float32 (d,): what a one-vector reader gets (see
    docs/interchange.md)."""
    return decode(blob, dimensions)[0]


__all__ = ["STORED_DTYPE", "VectorFormatError", "decode", "encode", "first_window", "window_count"]
