"""IVF: approximate vector search over an index's unit rows, with centroids rebuilt at load.

Seed 004 stores no centroids: they are built when an index is loaded, by k-means++ seeded from a PCG32
stream whose state comes from ``fnv1a64(index_id)``, so the same index gives the same centroids
everywhere and the file set is the same for flat and IVF retrieval.

Exact choices (spec/pcg32.md is not available here, so these are stated rather than inherited):

* **FNV-1a 64** of the index_id's UTF-8 bytes: offset basis 14695981039346656037, prime 1099511628211.
* **PCG32** is O'Neill's ``pcg32_random_r`` (64-bit LCG state, XSH RR output) with multiplier
  6364136223846793005 and increment 1442695040888963407 (PCG's default increment, already odd), seeded
  the way ``pcg32_srandom_r`` does: state = 0, step, state += seed, step. That is exactly
  ``pcg32_srandom_r(&rng, fnv1a64(index_id), 721347520444481703)``, since initseq 721347520444481703
  gives inc = (initseq << 1) | 1 = 1442695040888963407.
* **A uniform index below n** is ``pcg32_boundedrand_r`` (rejection below ``-n mod 2^32``, then mod n);
  **a uniform real in [0, 1)** is one output divided by 2^32.
* **k-means++**: the first centroid is row ``boundedrand(n)``; each next one is the first row whose
  running sum of D² (squared Euclidean distance to its nearest centroid so far, summed in float64 in row
  order) exceeds ``uniform * total``. Rows already chosen have D² = 0 and so are never picked again.
* **Lloyd**, spherical: rows join the centroid with the largest dot product (ties to the lowest
  centroid), each centroid becomes its members' normalised mean (an empty cluster keeps its centroid),
  for at most ``iterations`` rounds or until no row moves.
* **Search** scores the ``nprobe`` nearest centroids' rows exactly and returns the best ``k``.

Pure: numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

FNV_OFFSET = 14695981039346656037
FNV_PRIME = 1099511628211
PCG_MULTIPLIER = 6364136223846793005
PCG_INCREMENT = 1442695040888963407
MASK64 = (1 << 64) - 1
MASK32 = (1 << 32) - 1


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


SEED_SAMPLE_PER_LIST = 32


def default_nlist(n: int) -> int:
    """About sqrt(n) lists, the usual starting point (FAISS's guidelines suggest 4·sqrt(n) to 16·sqrt(n)
    for millions of rows; for the thousands a collection holds, sqrt(n) keeps lists ~sqrt(n) long)."""
    return max(1, min(n, round(math.sqrt(n))))


def kmeans_plus_plus(vectors: np.ndarray, k: int, rng: PCG32) -> np.ndarray:
    """Indices of k rows chosen by k-means++ (Arthur & Vassilvitskii, 2007) from ``rng``'s stream."""
    n = vectors.shape[0]
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and {n}")
    data = vectors.astype(np.float64)
    squared = np.einsum("ij,ij->i", data, data)
    chosen = [rng.bounded(n)]
    nearest = squared - 2.0 * data @ data[chosen[0]] + squared[chosen[0]]
    np.maximum(nearest, 0.0, out=nearest)
    nearest[chosen[0]] = 0.0
    for _ in range(1, k):
        cumulative = np.cumsum(nearest)
        total = float(cumulative[-1])
        if total <= 0.0:
            # Every row coincides with a centroid: take the first rows not chosen yet.
            taken = set(chosen)
            chosen.append(next(i for i in range(n) if i not in taken))
        else:
            target = rng.uniform() * total
            pick = int(np.searchsorted(cumulative, target, side="right"))
            chosen.append(min(pick, n - 1))
        last = chosen[-1]
        distance = squared - 2.0 * data @ data[last] + squared[last]
        np.maximum(distance, 0.0, out=distance)
        np.minimum(nearest, distance, out=nearest)
        nearest[chosen] = 0.0
    return np.asarray(chosen, dtype=np.int64)


@dataclass
class IVFIndex:
    """Centroids and, per centroid, the rows assigned to it."""

    vectors: np.ndarray  # (n, d) float32 unit rows
    centroids: np.ndarray  # (nlist, d) float32 unit rows
    assignment: np.ndarray  # centroid per row
    lists: list[np.ndarray]  # row ids per centroid, ascending

    @classmethod
    def build(cls, vectors: np.ndarray, *, index_id: str, nlist: int | None = None, iterations: int = 20) -> IVFIndex:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        n = vectors.shape[0]
        if n == 0:
            raise ValueError("an IVF index needs at least one vector")
        nlist = default_nlist(n) if nlist is None else max(1, min(nlist, n))
        # k-means++ costs a pass over its rows per centroid chosen, so it seeds from an evenly
        # spaced sample of SEED_SAMPLE_PER_LIST rows a list; Lloyd's rounds then use every row.
        sample = np.arange(n) if n <= SEED_SAMPLE_PER_LIST * nlist else np.linspace(
            0, n - 1, SEED_SAMPLE_PER_LIST * nlist
        ).astype(np.int64)
        seeds = sample[kmeans_plus_plus(vectors[sample], nlist, rng_for(index_id))]
        centroids = vectors[seeds].copy()
        assignment = np.full(n, -1, dtype=np.int64)
        for _ in range(iterations):
            moved = np.argmax(vectors @ centroids.T, axis=1)
            if np.array_equal(moved, assignment):
                break
            assignment = moved
            centroids = _update(vectors, assignment, centroids)
        order = np.argsort(assignment, kind="stable")
        bounds = np.searchsorted(assignment[order], np.arange(nlist + 1))
        lists = [order[bounds[c] : bounds[c + 1]] for c in range(nlist)]
        return cls(vectors=vectors, centroids=centroids, assignment=assignment, lists=lists)

    @property
    def nlist(self) -> int:
        return self.centroids.shape[0]

    def search(self, query: np.ndarray, k: int, *, nprobe: int = 8) -> tuple[np.ndarray, np.ndarray]:
        """The best ``k`` rows (ids, dot products, best first) among the ``nprobe`` nearest lists."""
        query = np.asarray(query, dtype=np.float32)
        nprobe = max(1, min(nprobe, self.nlist))
        near = np.argsort(-(self.centroids @ query), kind="stable")[:nprobe]
        candidates = np.sort(np.concatenate([self.lists[c] for c in near]))
        if candidates.size == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scores = self.vectors[candidates] @ query
        best = _top(scores, k)
        return candidates[best], scores[best]


def _update(vectors: np.ndarray, assignment: np.ndarray, previous: np.ndarray) -> np.ndarray:
    sums = np.zeros(previous.shape, dtype=np.float64)
    np.add.at(sums, assignment, vectors.astype(np.float64))
    norms = np.linalg.norm(sums, axis=1)
    centroids = previous.copy()
    filled = norms > 0
    centroids[filled] = (sums[filled] / norms[filled, None]).astype(np.float32)
    return centroids


def _top(scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the k largest scores, best first, ties to the lower position."""
    k = min(k, scores.shape[0])
    return np.lexsort((np.arange(scores.shape[0]), -scores))[:k]


def flat_search(vectors: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact scan IVF approximates: every row's dot product, best k."""
    scores = vectors @ np.asarray(query, dtype=np.float32)
    best = _top(scores, k)
    return best, scores[best]


def recall_at_k(ivf: IVFIndex, queries: np.ndarray, k: int = 10, *, nprobe: int = 8) -> float:
    """Mean fraction of the exact top-k that IVF also returns."""
    found = 0
    for query in queries:
        exact, _ = flat_search(ivf.vectors, query, k)
        approx, _ = ivf.search(query, k, nprobe=nprobe)
        found += len(set(exact.tolist()) & set(approx.tolist()))
    return found / (k * len(queries))


__all__ = ["PCG32", "IVFIndex", "default_nlist", "flat_search", "fnv1a64", "kmeans_plus_plus", "recall_at_k", "rng_for"]
