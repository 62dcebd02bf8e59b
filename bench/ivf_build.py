"""IVF build and search at scale: seed-exact k-means++ over every row, measured nprobe, latency, recall.

    python bench/ivf_build.py [--rows 100000] [--dim 384] [--data clustered|scifact] [--queries 200]
                              [--reference] [--iterations 4] [--recall 0.95] [--kernels]

Data:
* ``clustered``: synthetic unit vectors from a two-level mixture of √N Gaussian clusters (32
  super-centres, sibling centres at cosine ≈ 0.5, a spread per cluster, lognormal sizes), the set the
  scale review used; questions are new draws from the same mixture.
* ``scifact``: "SciFact-derived": real all-MiniLM-L6-v2 vectors of SciFact's 5,183 abstracts
  (``--scifact-vectors``, an .npy made with the project's local embedder), each row a random convex
  mix of a real abstract (weight 0.55–0.85) and another abstract close to it, plus noise, renormalised —
  so the set keeps the real vectors' geometry at any N; questions are the 1,109 SciFact claims
  embedded with the same model (``--scifact-queries``).

Prints, in one process: the build time (k-means++, Lloyd rounds, nprobe measurement); with
``--reference`` k-means++ alone and the plain float64 k-means++ on the same rows (its time and
whether every pick is the same); ``--real`` uses SciFact's own 5,183 vectors instead of derived ones; the
measured nprobe and recall on the build's own rows; and for the questions the exact flat scan (``M @ q`` +
argpartition) against IVF at the measured nprobe (p50/p95 ms, recall@10, ratio).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

# One BLAS thread, as in a server process (the local embedder sets it so): on 2 shared cores a
# multi-threaded product of a few thousand rows spends milliseconds waking its threads.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from collections_app.index import ivf, kmeans  # noqa: E402


def unit(rows: np.ndarray) -> np.ndarray:
    rows = np.asarray(rows, dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def clustered(n: int, dim: int, queries: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    clusters = max(2, round(np.sqrt(n)))
    supers = unit(rng.standard_normal((32, dim)))
    parent = rng.integers(0, 32, clusters)
    # Siblings: half the parent, half a fresh direction -> cosine about 0.5 between siblings.
    centres = unit(supers[parent] + unit(rng.standard_normal((clusters, dim))))
    spread = rng.uniform(0.6, 1.2, clusters).astype(np.float32)
    sizes = rng.lognormal(0.0, 0.8, clusters)
    probability = sizes / sizes.sum()

    def draw(count: int, generator: np.random.Generator) -> np.ndarray:
        out = np.empty((count, dim), dtype=np.float32)
        for start in range(0, count, 65536):
            m = min(65536, count - start)
            which = generator.choice(clusters, m, p=probability)
            noise = generator.standard_normal((m, dim), dtype=np.float32) / np.sqrt(dim)
            out[start : start + m] = unit(centres[which] + spread[which, None] * noise)
        return out

    return draw(n, rng), draw(queries, np.random.default_rng(seed + 1))


def scifact_derived(n: int, corpus: Path, questions: Path, queries: int, seed: int = 0):
    base = unit(np.load(corpus))
    rng = np.random.default_rng(seed)
    # Each real abstract's 20 nearest abstracts: a derived row mixes an abstract with one of them.
    near = np.empty((base.shape[0], 20), dtype=np.int64)
    for start in range(0, base.shape[0], 512):
        scores = base[start : start + 512] @ base.T
        near[start : start + 512] = np.argsort(-scores, axis=1)[:, 1:21]
    out = np.empty((n, base.shape[1]), dtype=np.float32)
    for start in range(0, n, 65536):
        m = min(65536, n - start)
        a = rng.integers(0, base.shape[0], m)
        b = near[a, rng.integers(0, 20, m)]
        w = rng.uniform(0.55, 0.85, m).astype(np.float32)[:, None]
        noise = rng.standard_normal((m, base.shape[1]), dtype=np.float32) * (0.15 / np.sqrt(base.shape[1]))
        out[start : start + m] = unit(w * base[a] + (1 - w) * base[b] + noise)
    q = unit(np.load(questions))
    return out, q[:queries]


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--data", choices=["clustered", "scifact"], default="clustered")
    parser.add_argument("--scifact-vectors", type=Path, default=None)
    parser.add_argument("--scifact-queries", type=Path, default=None)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--recall", type=float, default=0.95)
    parser.add_argument(
        "--reference",
        action="store_true",
        help="time k-means++ alone, and the plain float64 k-means++ against it",
    )
    parser.add_argument(
        "--real", action="store_true", help="with --data scifact: the real abstracts' vectors only"
    )
    parser.add_argument("--nprobe", type=int, nargs="*", default=[], help="extra nprobe values to report")
    parser.add_argument(
        "--kernels",
        action="store_true",
        help="then faiss and ragsite's kernels over the same lists (bench/ivf_kernels.py)",
    )
    args = parser.parse_args()

    if args.data == "clustered":
        vectors, questions = clustered(args.rows, args.dim, args.queries)
    else:
        if not args.scifact_vectors or not args.scifact_queries:
            parser.error("--data scifact needs --scifact-vectors and --scifact-queries")
        vectors, questions = scifact_derived(
            args.rows, args.scifact_vectors, args.scifact_queries, args.queries
        )
        if args.real:
            vectors = unit(np.load(args.scifact_vectors))
    n, d = vectors.shape
    nlist = kmeans.default_nlist(n)
    print(f"# {args.data}: {n} rows x {d}, {nlist} lists, {questions.shape[0]} questions")

    if args.reference:
        (seeds, _owner), t_pp = timed(
            kmeans.kmeans_plus_plus_assigned, vectors, nlist, kmeans.rng_for("bench")
        )
        print(f"k-means++ over every row (float32 pass, float64 check): {t_pp:.1f} s")
        reference, t_ref = timed(kmeans.kmeans_plus_plus_reference, vectors, nlist, kmeans.rng_for("bench"))
        same = np.array_equal(reference, seeds)
        print(
            f"k-means++ plain float64 (reference): {t_ref:.1f} s; same picks: {same}; ratio "
            f"{t_ref / t_pp:.2f}x"
        )
    lists, t_build = timed(
        ivf.build_lists, vectors, index_id="bench", iterations=args.iterations, target_recall=args.recall
    )
    sizes = np.diff(lists.offsets)
    print(
        f"build_lists (k-means++, {args.iterations} Lloyd rounds, nprobe measurement): {t_build:.1f} s; "
        f"list sizes {sizes.min()}-{sizes.max()} (median {int(np.median(sizes))})"
    )
    print(
        f"measured on {min(200, n)} own rows and as many between rows: nprobe {lists.nprobe} reaches "
        f"recall@10 {lists.recall:.3f} "
        f"(target {args.recall})"
    )

    def flat(q):
        scores = vectors @ q
        top = np.argpartition(-scores, 10)[:10]
        return top[np.argsort(-scores[top])]

    probes = list(dict.fromkeys([lists.nprobe, *args.nprobe]))  # the measured one first, each once
    times = {"flat": []} | {p: [] for p in probes}
    found = {p: 0 for p in probes}
    for _ in range(2):
        for q in questions:
            start = time.perf_counter()
            exact = flat(q)
            times["flat"].append(time.perf_counter() - start)
            for p in probes:
                start = time.perf_counter()
                ids, _ = lists.search(vectors, q, 10, nprobe=p)
                times[p].append(time.perf_counter() - start)
                found[p] += len(set(ids.tolist()) & set(exact.tolist()))

    def p(values, q):
        return 1000 * statistics.quantiles(values, n=100)[q - 1]

    base = statistics.median(times["flat"])
    print(f"numpy flat: p50 {p(times['flat'], 50):.2f} ms, p95 {p(times['flat'], 95):.2f} ms")
    for probe in probes:
        recall = found[probe] / (10 * 2 * questions.shape[0])
        print(
            f"IVF nprobe {probe}: p50 {p(times[probe], 50):.2f} ms, p95 {p(times[probe], 95):.2f} ms, "
            f"recall@10 on the questions {recall:.3f}, {statistics.median(times[probe]) / base:.2f}x flat"
        )
    if args.kernels:
        sys.path.insert(0, str(REPO / "bench"))
        from ivf_kernels import compare

        compare(vectors, questions, lists)


if __name__ == "__main__":
    main()
