"""The seeded choice of an IVF's starting centroids: a PCG32 generator keyed by the index's id (FNV-1a), the
number of lists for n rows, and k-means++ over unit rows, blocked so the temporaries stay bounded.

Split from `ivf` (which runs Lloyd's rounds from these picks and keeps the lists); pure numpy, no settings.
"""

from __future__ import annotations

import math

import numpy as np

FNV_OFFSET = 14695981039346656037
FNV_PRIME = 1099511628211
PCG_MULTIPLIER = 6364136223846793005
PCG_INCREMENT = 1442695040888963407
MASK64 = (1 << 64) - 1
MASK32 = (1 << 32) - 1
# Rows per block when a float64 copy is needed (the first pass of k-means++), to bound the temporary.
BLOCK_ROWS = 65536


def fnv1a64(data: bytes) -> int:
    """FNV-1a, 64-bit, of ``data``."""
    value = FNV_OFFSET
    for byte in data:
        value = ((value ^ byte) * FNV_PRIME) & MASK64
    return value


class PCG32:
    """pcg32_random_r (XSH RR) from pcg_basic.c; see the module docstring for the seeding."""

    def __init__(self, seed: int, *, increment: int = PCG_INCREMENT):
        self.inc = increment | 1
        self.state = 0
        self.next_u32()
        self.state = (self.state + seed) & MASK64
        self.next_u32()

    @classmethod
    def from_sequence(cls, initstate: int, initseq: int) -> PCG32:
        """Exactly ``pcg32_srandom_r(initstate, initseq)``: inc = (initseq << 1) | 1."""
        return cls(initstate, increment=((initseq << 1) | 1) & MASK64)

    def next_u32(self) -> int:
        old = self.state
        self.state = (old * PCG_MULTIPLIER + self.inc) & MASK64
        xorshifted = (((old >> 18) ^ old) >> 27) & MASK32
        rot = old >> 59
        return ((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & MASK32

    def bounded(self, bound: int) -> int:
        """A uniform integer in [0, bound): pcg32_boundedrand_r."""
        threshold = (-bound & MASK32) % bound
        while True:
            r = self.next_u32()
            if r >= threshold:
                return r % bound

    def uniform(self) -> float:
        """A uniform real in [0, 1): one output over 2^32."""
        return self.next_u32() / 4294967296.0


def rng_for(index_id: str) -> PCG32:
    return PCG32(fnv1a64(index_id.encode("utf-8")))


def default_nlist(n: int) -> int:
    """About sqrt(n) lists (lists ≈ √N), so a list holds about sqrt(n) rows."""
    return max(1, min(n, round(math.sqrt(n))))


# --- k-means++ ---------------------------------------------------------------------------------


def _squared_distances(rows: np.ndarray, centre: np.ndarray) -> np.ndarray:
    """Σ (x_i − c_i)² per row, in float64: zero exactly for a row equal to the centre, whatever the
    summation order, which |x|² + |c|² − 2 x·c is not."""
    difference = rows.astype(np.float64) - centre.astype(np.float64)
    return np.einsum("ij,ij->i", difference, difference)


def _squared_norms(vectors: np.ndarray) -> np.ndarray:
    squared = np.empty(vectors.shape[0], dtype=np.float64)
    for start in range(0, vectors.shape[0], BLOCK_ROWS):
        block = vectors[start : start + BLOCK_ROWS].astype(np.float64)
        squared[start : start + block.shape[0]] = np.einsum("ij,ij->i", block, block)
    return squared


def _float32_slack(d: int) -> float:
    """Twice Higham's γ_d for a float32 dot product of length d, doubled again for the float64 side:
    |D² from a float32 dot − D² in float64| ≤ slack · |x| · |c| whatever order BLAS sums in."""
    unit = 2.0**-24
    return 4.0 * d * unit / (1 - d * unit)


def kmeans_plus_plus(vectors: np.ndarray, k: int, rng: PCG32) -> np.ndarray:
    """Indices of k rows chosen by k-means++ (Arthur & Vassilvitskii, 2007) over every row of ``vectors``."""
    return kmeans_plus_plus_assigned(vectors, k, rng)[0]


def kmeans_plus_plus_assigned(vectors: np.ndarray, k: int, rng: PCG32) -> tuple[np.ndarray, np.ndarray]:
    """k-means++ over every row; returns the chosen rows and each row's nearest chosen one (its position).

    One float32 pass over the rows per centroid; rows that might move (their float32 distance to the
    new centroid within the rounding bound of their D²) are scored again in float64, so D² is exactly
    the float64 algorithm's and the picks are too.
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n = vectors.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and {n}")
    squared = _squared_norms(vectors)
    norms = np.sqrt(squared)
    slack = _float32_slack(vectors.shape[1])
    first = rng.bounded(n)
    chosen = [first]
    nearest = np.empty(n, dtype=np.float64)
    for start in range(0, n, BLOCK_ROWS):
        block = vectors[start : start + BLOCK_ROWS]
        nearest[start : start + block.shape[0]] = _squared_distances(block, vectors[first])
    owner = np.zeros(n, dtype=np.int64)
    cumulative = np.empty(n, dtype=np.float64)
    for position in range(1, k):
        np.cumsum(nearest, out=cumulative)
        total = float(cumulative[-1])
        if total <= 0.0:
            # Every row coincides with a centroid: take the first row not chosen yet.
            taken = set(chosen)
            last = next(i for i in range(n) if i not in taken)
        else:
            target = rng.uniform() * total
            last = min(int(np.searchsorted(cumulative, target, side="right")), n - 1)
        chosen.append(last)
        centre32 = vectors[last]
        centre_squared = float(squared[last])
        # rough − nearest < bound, computed in place over one temporary.
        rough = (vectors @ centre32).astype(np.float64)
        rough *= -2.0
        rough += squared
        rough += centre_squared - 1e-12
        rough -= nearest
        rough -= (slack * math.sqrt(centre_squared)) * norms
        maybe = np.flatnonzero(rough < 0.0)
        if maybe.size:
            exact = _squared_distances(vectors[maybe], centre32)
            closer = exact < nearest[maybe]
            moved = maybe[closer]
            nearest[moved] = exact[closer]
            owner[moved] = position
        owner[last] = position
    return np.asarray(chosen, dtype=np.int64), owner


def kmeans_plus_plus_reference(vectors: np.ndarray, k: int, rng: PCG32) -> np.ndarray:
    """The same algorithm written plainly in float64, one full pass per centroid: the tests' oracle."""
    n = vectors.shape[0]
    data = vectors.astype(np.float64)
    chosen = [rng.bounded(n)]
    nearest = _squared_distances(data, data[chosen[0]])
    for _ in range(1, k):
        cumulative = np.cumsum(nearest)
        total = float(cumulative[-1])
        if total <= 0.0:
            taken = set(chosen)
            chosen.append(next(i for i in range(n) if i not in taken))
        else:
            chosen.append(min(int(np.searchsorted(cumulative, rng.uniform() * total, side="right")), n - 1))
        np.minimum(nearest, _squared_distances(data, data[chosen[-1]]), out=nearest)
    return np.asarray(chosen, dtype=np.int64)
