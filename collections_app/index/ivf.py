"""IVF: approximate vector search over an index's unit rows, with centroids derived from the index_id.

Seed 004 stores no centroids in ``rag/<index_id>/``: a reader builds them with k-means++ seeded from a
PCG32 stream whose state comes from ``fnv1a64(index_id)``, so the same index gives the same centroids
everywhere, whatever collection name it was imported under. Ragsite computes them once per build and
keeps them in the build's own derived search index (:func:`build_lists`, :meth:`IVFLists.arrays`); the
interchange file set stays the same for flat and IVF retrieval.

Exact choices (spec/pcg32.md is not available here, so these are stated rather than inherited):

* **FNV-1a 64** of the index_id's UTF-8 bytes: offset basis 14695981039346656037, prime 1099511628211.
* **PCG32** is O'Neill's ``pcg32_random_r`` (64-bit LCG state, XSH RR output) with multiplier
  6364136223846793005 and increment 1442695040888963407 (PCG's default increment, already odd), seeded
  the way ``pcg32_srandom_r`` does: state = 0, step, state += seed, step. That is exactly
  ``pcg32_srandom_r(&rng, fnv1a64(index_id), 721347520444481703)``, since initseq 721347520444481703
  gives inc = (initseq << 1) | 1 = 1442695040888963407.
* **A uniform index below n** is ``pcg32_boundedrand_r`` (rejection below ``-n mod 2^32``, then mod n);
  **a uniform real in [0, 1)** is one output divided by 2^32.
* **k-means++ over every row**: the first centroid is row ``boundedrand(n)``; each next one is the
  first row whose running sum of D² (squared Euclidean distance to its nearest centroid so far,
  ``Σ (x_i − c_i)²`` in float64, summed in float64 in row order) exceeds ``uniform * total``. Rows
  equal to a centroid have D² = 0 exactly and so are never picked again; when every row has D² = 0 the
  next centroid is the first row not chosen yet (no output is drawn).
* **Lloyd**, spherical: rows join the centroid with the largest dot product (ties to the lowest
  centroid), each centroid becomes its members' normalised mean (an empty cluster keeps its centroid),
  for at most ``iterations`` rounds or until no row moves.
* **Search** scores the ``nprobe`` nearest centroids' rows exactly and returns the best ``k``.

Speed (see docs/decisions/0006): k-means++ needs one pass over every row per centroid, so each pass is a
float32 matrix-vector product (half the memory traffic of float64, and the matrix search already
holds); only the rows whose float32 distance comes within its rounding bound of their D² are scored
again in float64, so D² — and therefore every pick — is the float64 algorithm's.

Pure: numpy only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from ragsite.top import top_rows

from .kmeans import BLOCK_ROWS, default_nlist, kmeans_plus_plus_assigned, rng_for
from .vector_codec import HalfQuery, half_products_of_spans, half_query, question_vector

# --- Lloyd ---------------------------------------------------------------------------------------


def _assign(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """The centroid with the largest dot product per row (ties to the lowest), in blocks of rows."""
    assignment = np.empty(vectors.shape[0], dtype=np.int64)
    for start in range(0, vectors.shape[0], BLOCK_ROWS):
        block = vectors[start : start + BLOCK_ROWS]
        assignment[start : start + block.shape[0]] = np.argmax(block @ centroids.T, axis=1)
    return assignment


def _means(vectors: np.ndarray, assignment: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Each centroid's members' normalised mean; an empty list keeps its centroid.

    Summed per list over the rows sorted by list (np.add.reduceat, in float32: its float64 path was
    6x slower), not with np.add.at, which was half the build time at 100,000 rows.
    """
    nlist = previous.shape[0]
    order = np.argsort(assignment, kind="stable")
    counts = np.bincount(assignment, minlength=nlist)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    filled = counts > 0
    centroids = previous.copy()
    if not filled.any():
        return centroids
    sums = np.add.reduceat(vectors[order], starts[filled], axis=0).astype(np.float64)
    norms = np.linalg.norm(sums, axis=1)
    ok = norms > 0
    targets = np.flatnonzero(filled)[ok]
    centroids[targets] = (sums[ok] / norms[ok, None]).astype(np.float32)
    return centroids


# --- The lists ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class IVFLists:
    """Centroids and the rows of each list as flat arrays, and the nprobe the build measured.

    ``members[offsets[c]:offsets[c + 1]]`` are list c's rows, ascending. These arrays (see
    :meth:`arrays`) are what a build's search index stores; :meth:`from_arrays` reads them back.
    """

    centroids: np.ndarray  # (nlist, d) float32, unit rows
    offsets: np.ndarray  # (nlist + 1,) int64
    members: np.ndarray  # (n,) int64 row ids, grouped by list
    nprobe: int  # the smallest nprobe whose measured recall@10 reached `target_recall`
    recall: float  # recall@10 measured at `nprobe`
    target_recall: float
    index_id: str
    # The vectors in list order (`ordered[i]` is vector `members[i]`), the index's one copy of them
    # (float16): a probe reads each list as one contiguous block (`scan`) instead of gathering its rows.
    ordered: np.ndarray | None = None

    @property
    def nlist(self) -> int:
        return int(self.centroids.shape[0])

    @cached_property
    def bounds(self) -> list[int]:
        """``offsets`` as a list, read once: a probe's spans are ten lookups, not ten numpy scalars."""
        return self.offsets.tolist()

    def list_rows(self, c: int) -> np.ndarray:
        return self.members[int(self.offsets[c]) : int(self.offsets[c + 1])]

    def probe(self, query: np.ndarray, nprobe: int | None = None) -> np.ndarray:
        """The rows of the ``nprobe`` lists nearest ``query`` (default: the measured nprobe), ascending."""
        near = self.nearest_lists(query, nprobe)
        rows = np.concatenate([self.list_rows(c) for c in near]) if near.size else self.members[:0]
        rows.sort()
        return rows

    def nearest_lists(self, query: np.ndarray, nprobe: int | None = None) -> np.ndarray:
        """The ``nprobe`` lists whose centroids are nearest ``query`` (default: the measured nprobe)."""
        nprobe = self.nprobe if nprobe is None else nprobe
        nlist = self.nlist
        nprobe = max(1, min(int(nprobe), nlist))
        if nprobe >= nlist:
            return np.arange(nlist)
        closeness = self.centroids @ np.asarray(query, dtype=np.float32)
        return (-closeness).argpartition(nprobe - 1)[:nprobe]

    def scan(
        self,
        query: np.ndarray | HalfQuery,
        nprobe: int | None,
        gather: Callable[[np.ndarray, np.ndarray | HalfQuery], np.ndarray],
    ) -> tuple[np.ndarray, np.ndarray]:
        """Every probed vector's id and its product with ``query`` (float32), in list order.

        ``query`` may come prepared (`vector_codec.half_query`, as a search prepares it once). With the
        list-ordered vectors (`ordered`, the index's float16 copy) each list is one contiguous block,
        their float16 products taken into one buffer (`vector_codec.half_products_of_spans`, each row the
        bits the exact path gives it); without them (lists built in this process) ``gather(ids, query)``
        reads the rows.
        """
        near = self.nearest_lists(question_vector(query), nprobe)
        bounds = self.bounds
        spans = [(bounds[c], bounds[c + 1]) for c in near.tolist()]
        ids = np.concatenate([self.members[lo:hi] for lo, hi in spans]) if spans else self.members[:0]
        if self.ordered is None:
            return ids, gather(ids, query)
        return ids, half_products_of_spans(self.ordered, spans, half_query(query))

    def search(self, vectors: np.ndarray, query: np.ndarray, k: int, *, nprobe: int | None = None):
        """The best ``k`` rows (ids, dot products, best first, ties to the lower row) in the probed lists."""
        query = np.asarray(query, dtype=np.float32)
        candidates = self.probe(query, nprobe)
        if candidates.size == 0:
            return candidates, np.zeros(0, dtype=np.float32)
        scores = np.asarray(vectors[candidates], dtype=np.float32) @ query
        best = top_rows(scores, None, k)
        return candidates[best], scores[best]

    # --- storage

    def arrays(self) -> dict[str, np.ndarray]:
        """The flat little-endian arrays to store: centroids (nlist × d float32), offsets, members."""
        return {
            "ivf_centroids": np.ascontiguousarray(self.centroids, dtype="<f4"),
            "ivf_offsets": np.ascontiguousarray(self.offsets, dtype="<i8"),
            "ivf_members": np.ascontiguousarray(self.members, dtype="<i8"),
        }

    def meta(self) -> dict:
        """What goes beside the arrays (JSON): shapes, the measured nprobe and recall, the index_id."""
        return {
            "ivf_nlist": self.nlist,
            "ivf_dimensions": int(self.centroids.shape[1]),
            "ivf_rows": int(self.members.shape[0]),
            "ivf_nprobe": self.nprobe,
            "ivf_recall": self.recall,
            "ivf_target_recall": self.target_recall,
            "ivf_index_id": self.index_id,
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict) -> IVFLists:
        """Read back :meth:`arrays` and :meth:`meta` (memory-mapped arrays are used as they are), and the
        list-ordered vectors when ``arrays`` holds them (``ivf_vectors``)."""
        nlist, d, rows = int(meta["ivf_nlist"]), int(meta["ivf_dimensions"]), int(meta["ivf_rows"])
        centroids = np.asarray(arrays["ivf_centroids"]).reshape(nlist, d)
        offsets, members = np.asarray(arrays["ivf_offsets"]), np.asarray(arrays["ivf_members"])
        if (
            offsets.shape != (nlist + 1,)
            or members.shape != (rows,)
            or int(offsets[-1]) != rows
            or int(offsets[0])
        ):
            raise ValueError("IVF offsets do not close on its members")
        ordered = arrays.get("ivf_vectors")
        if ordered is not None:
            ordered = np.asarray(ordered).reshape(rows, d)
        return cls(
            centroids=centroids,
            offsets=offsets,
            members=members,
            nprobe=int(meta["ivf_nprobe"]),
            recall=float(meta["ivf_recall"]),
            target_recall=float(meta["ivf_target_recall"]),
            index_id=str(meta["ivf_index_id"]),
            ordered=ordered,
        )


def build_lists(
    vectors: np.ndarray,
    *,
    index_id: str,
    nlist: int | None = None,
    iterations: int = 4,
    target_recall: float = 0.95,
    sample: int = 200,
    k: int = 10,
) -> IVFLists:
    """Cluster ``vectors`` (unit rows) into about √n lists and measure the nprobe that reaches
    ``target_recall``.

    Centroids: k-means++ over every row from ``rng_for(index_id)``, then ``iterations`` Lloyd rounds
    over every row. The nprobe: recall@k against the exact scan for ``sample`` of the rows themselves
    used as queries (each query's own row left out of both sides), the smallest nprobe reaching it.
    """
    vectors = np.ascontiguousarray(vectors, dtype=np.float32)
    n = vectors.shape[0]
    if n == 0:
        raise ValueError("an IVF index needs at least one vector")
    if not 0 < target_recall <= 1:
        raise ValueError("target_recall must be in (0, 1]")
    nlist = default_nlist(n) if nlist is None else max(1, min(int(nlist), n))
    seeds, assignment = kmeans_plus_plus_assigned(vectors, nlist, rng_for(index_id))
    centroids = vectors[seeds].copy()
    norms = np.linalg.norm(centroids, axis=1)
    centroids[norms > 0] /= norms[norms > 0, None]
    for _ in range(iterations):
        centroids = _means(vectors, assignment, centroids)
        moved = _assign(vectors, centroids)
        if np.array_equal(moved, assignment):
            break
        assignment = moved
    order = np.argsort(assignment, kind="stable")  # stable: rows ascending within each list
    offsets = np.zeros(nlist + 1, dtype=np.int64)
    np.cumsum(np.bincount(assignment, minlength=nlist), out=offsets[1:])
    unmeasured = IVFLists(
        centroids=centroids,
        offsets=offsets,
        members=order.astype(np.int64),
        nprobe=nlist,
        recall=1.0,
        target_recall=target_recall,
        index_id=index_id,
    )
    curve = recall_curve(vectors, unmeasured, assignment, sample=sample, k=k)
    reached = np.flatnonzero(curve >= target_recall - 1e-12)
    nprobe = int(reached[0]) + 1 if reached.size else nlist
    return IVFLists(
        centroids=centroids,
        offsets=offsets,
        members=unmeasured.members,
        nprobe=nprobe,
        recall=float(curve[nprobe - 1]),
        target_recall=target_recall,
        index_id=index_id,
    )


def query_sample(n: int, count: int) -> np.ndarray:
    """``count`` evenly spaced rows (deterministic, so a rebuild of the same rows measures the same)."""
    if n <= count:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, count).astype(np.int64))


# How many rows, spread across the collection, each "between" question averages (see recall_curves).
BETWEEN_ROWS = 4


def recall_curves(
    vectors: np.ndarray, lists: IVFLists, assignment: np.ndarray, *, sample: int = 200, k: int = 10
) -> tuple[np.ndarray, np.ndarray]:
    """recall@k against the exact scan at nprobe 1..nlist (element p − 1), for two kinds of question:

    * **own rows**: ``sample`` evenly spaced rows used as questions, each one's own row left out
      (it would be found at nprobe 1);
    * **between rows**: the normalised mean of each of those rows and the three rows a quarter,
      half and three quarters of the collection away. Real questions sit between documents rather
      than on one: on SciFact-derived vectors own rows reach 0.95 at nprobe 4 where the real
      SciFact claims get 0.81; midpoints of two rows still left the claims at 0.915, means of four
      rows at 0.958 (docs/decisions/0006).

    An exact neighbour is found at nprobe p exactly when its list is among the p lists nearest the
    question: within the probed rows it is still beaten by fewer than k. So one ranking of the lists
    per question gives the whole curve.
    """
    n = vectors.shape[0]
    rows = query_sample(n, sample)
    own = _curve(vectors, lists, assignment, vectors[rows], rows, k)
    between = sum(vectors[(rows + j * n // BETWEEN_ROWS) % n].astype(np.float64) for j in range(BETWEEN_ROWS))
    norms = np.linalg.norm(between, axis=1, keepdims=True)
    between = (between / np.where(norms > 0, norms, 1.0)).astype(np.float32)
    return own, _curve(vectors, lists, assignment, between, None, k)


def recall_curve(
    vectors: np.ndarray, lists: IVFLists, assignment: np.ndarray, *, sample: int = 200, k: int = 10
) -> np.ndarray:
    """The recall a build holds itself to at each nprobe: the lower of :func:`recall_curves`' two."""
    own, between = recall_curves(vectors, lists, assignment, sample=sample, k=k)
    return np.minimum(own, between)


def _curve(vectors, lists, assignment, queries, left_out, k) -> np.ndarray:
    n = vectors.shape[0]
    kk = min(k, n - 1 if left_out is not None else n)
    found = np.zeros(lists.nlist, dtype=np.int64)
    total = 0
    for start in range(0, queries.shape[0], 64):
        batch = queries[start : start + 64]
        scores = batch @ vectors.T if n <= BLOCK_ROWS else _scores_in_blocks(vectors, batch)
        if left_out is not None:
            scores[np.arange(batch.shape[0]), left_out[start : start + 64]] = -np.inf
        closeness = batch @ lists.centroids.T
        list_rank = np.empty_like(closeness, dtype=np.int64)
        order = np.argsort(-closeness, axis=1, kind="stable")
        list_rank[np.arange(batch.shape[0])[:, None], order] = np.arange(lists.nlist)[None, :]
        if kk <= 0:
            continue
        for i in range(batch.shape[0]):
            neighbours = top_rows(scores[i], None, kk)
            found += np.bincount(list_rank[i, assignment[neighbours]], minlength=lists.nlist)
            total += kk
    if total == 0:
        return np.ones(lists.nlist)
    return np.cumsum(found) / total


def _scores_in_blocks(vectors: np.ndarray, queries: np.ndarray) -> np.ndarray:
    scores = np.empty((queries.shape[0], vectors.shape[0]), dtype=np.float32)
    for start in range(0, vectors.shape[0], BLOCK_ROWS):
        block = vectors[start : start + BLOCK_ROWS]
        scores[:, start : start + block.shape[0]] = queries @ block.T
    return scores


def flat_search(vectors: np.ndarray, query: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The exact scan IVF approximates: every row's dot product, best k."""
    scores = vectors @ np.asarray(query, dtype=np.float32)
    best = top_rows(scores, None, k)
    return best, scores[best]


def recall_by_nprobe(vectors: np.ndarray, lists: IVFLists, queries: np.ndarray, k: int = 10) -> np.ndarray:
    """:func:`recall_at_k` of ``queries`` at every nprobe 1..nlist (element p − 1), from one exact scan
    per query (see :func:`recall_curves`)."""
    assignment = np.empty(lists.members.shape[0], dtype=np.int64)
    assignment[lists.members] = np.repeat(np.arange(lists.nlist), np.diff(lists.offsets))
    return _curve(vectors, lists, assignment, np.asarray(queries, dtype=np.float32), None, k)


def recall_at_k(
    vectors: np.ndarray, lists: IVFLists, queries: np.ndarray, k: int = 10, *, nprobe: int | None = None
) -> float:
    """Mean fraction of the exact top-k that the IVF also returns, for the given query vectors."""
    found = 0
    for query in queries:
        exact, _ = flat_search(vectors, query, k)
        approx, _ = lists.search(vectors, query, k, nprobe=nprobe)
        found += len(set(exact.tolist()) & set(approx.tolist()))
    return found / (min(k, vectors.shape[0]) * len(queries))


__all__ = [
    "IVFLists",
    "build_lists",
    "flat_search",
    "recall_at_k",
    "recall_by_nprobe",
    "recall_curve",
    "recall_curves",
]
