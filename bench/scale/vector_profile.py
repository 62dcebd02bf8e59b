"""One whole vector IVF search at N paragraphs, step by step, against its goal in the same process.

    python bench/scale/vector_profile.py                    # 100,000: timings, then a cProfile
    python bench/scale/vector_profile.py --profile 0        # timings only

Issue 43 item 4's goal is the whole vector search (`search_collection`, mode "vector", IVF) within
2 x faiss IVFFlat (over ragsite's own lists, as bench/scale/scale_peers.py builds it) + reading the ten
hits' texts (`rows.stored_rows`). This reuses search_scale.py's kept store and index (make them with
`search_scale.py --sizes N --populate`), interleaves four arms (the whole search, ragsite's kernel as
search_scale.py times it, faiss IVFFlat, the texts' read) question by question after a 64 MiB cache
sweep, and prints each arm's p50 of the wall clock and of the process's CPU time, the ratio to the goal
and what lies around the kernel and the texts. With --profile R, it then runs R searches under
cProfile and prints the functions by their own and cumulative time, so the fixed cost around the kernel
can be read off per step.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import time
from pathlib import Path

import numpy as np

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "scale"))
from scale_peers import write_faiss_ivf  # noqa: E402
from scale_stand_ins import GivenVectors  # noqa: E402
from scale_store import DIMENSIONS, WORK, Mixture, load_scifact, setup_django  # noqa: E402

SWEEP_BYTES = 64 << 20


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument(
        "--dataset",
        type=Path,
        default=Path(os.environ.get("SCIFACT", ROOT.parent / "shared" / "datasets" / "scifact")),
    )
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--profile", type=int, default=2000, help="searches run under cProfile (0: none)")
    parser.add_argument("--dump", type=Path, help="also write the profile here (pstats)")
    parser.add_argument("--top", type=int, default=45, help="functions printed per profile table")
    args = parser.parse_args()
    n = args.size
    if not (WORK / f"scale-{n}.sqlite3").exists():
        raise SystemExit(f"no kept store of {n:,}: run search_scale.py --sizes {n} --populate first")
    setup_django(n)
    import faiss
    from django.conf import settings

    from collections_app.limits import MAX_ANSWER_CHARS
    from collections_app.models import Agent, Collection, CollectionBuilt, Paragraph
    from collections_app.services.indexes import mapped_index
    from collections_app.services.search import search_collection
    from collections_app.services.search.rows import stored_rows
    from ragsite import embedding

    _corpus, asked = load_scifact(args.dataset, args.questions)
    agent = Agent.objects.get(agent_id="scale")
    collection = Collection.objects.get(agent=agent, name="scale")
    vectors = Mixture(n).draw(len(asked), rng=np.random.default_rng(11))
    given = {q: v for q, v in zip(asked, vectors, strict=True)}
    embedding.get_embedder = lambda backend=None: GivenVectors("all-MiniLM-L6-v2", given)
    settings.IVF_MIN_PARAGRAPHS = 1
    mapped = mapped_index(collection, CollectionBuilt.objects.get(collection=collection))[1]
    lists = mapped.ivf
    faiss.omp_set_num_threads(1)
    ivf_file = WORK / f"faiss-ivf-{n}-{lists.index_id[:12]}-{lists.nlist}.index"
    if not ivf_file.exists():
        matrix = np.empty((n, DIMENSIONS), dtype=np.float32)
        rows = Paragraph.objects.filter(collection=collection).order_by("ordinal")
        for i, blob in enumerate(rows.values_list("embedding", flat=True).iterator(chunk_size=10000)):
            matrix[i] = np.frombuffer(blob, dtype="<f2")
        write_faiss_ivf(matrix, lists, ivf_file)
    ivf = faiss.read_index(str(ivf_file))
    params = faiss.SearchParametersIVF(nprobe=lists.nprobe)

    def ours(q):
        return search_collection(
            agent=agent,
            collection=collection,
            question=q,
            mode="vector",
            most=10,
            around=0,
            min_score=0.0,
            max_chars=MAX_ANSWER_CHARS,
        )

    def faiss_ivf(q):
        return ivf.search(given[q][None], 10, params=params)[1][0]

    hits = {q: [int(mapped.row_paragraph[r]) for r in faiss_ivf(q)] for q in asked}

    def texts(q):
        return stored_rows(hits[q])

    from collections_app.services.search.approximate import CANDIDATE_DEPTH
    from ragsite.top import top_rows

    def kernel(q):  # the probe and the vector top-K a search rescores (search_scale.py's "vector IVF kernel")
        members, closeness = lists.scan(given[q], None, mapped.products)
        return members[top_rows(closeness, None, CANDIDATE_DEPTH * 2)]

    arms = {"vector IVF": ours, "kernel": kernel, "faiss IVFFlat": faiss_ivf, "texts' read": texts}
    for q in asked[:5]:
        for arm in arms.values():
            arm(q)
    wall = {name: [] for name in arms}
    cpu = {name: [] for name in arms}
    sweep = np.ones(SWEEP_BYTES // 8)
    shuffle = np.random.default_rng(3)
    names = list(arms)
    for _pass in range(args.passes):
        for q in asked:
            for name in shuffle.permutation(names):
                sweep.sum()
                started, started_cpu = time.perf_counter(), time.process_time()
                arms[name](q)
                wall[name].append(time.perf_counter() - started)
                cpu[name].append(time.process_time() - started_cpu)
    print(f"{n:,} paragraphs, {len(asked)} questions x {args.passes} passes, load {os.getloadavg()[0]:.1f}")
    for clock, times in (("wall", wall), ("CPU", cpu)):
        p50 = {name: 1000 * float(np.median(v)) for name, v in times.items()}
        goal = 2 * p50["faiss IVFFlat"] + p50["texts' read"]
        shown = ", ".join(f"{name} {ms:.3f}" for name, ms in p50.items())
        rest = p50["vector IVF"] - p50["kernel"] - p50["texts' read"]
        print(
            f"{clock} p50 ms: {shown}; goal {goal:.3f}; vector IVF / goal {p50['vector IVF'] / goal:.2f}x;"
            f" around the kernel and the texts {rest:.3f}"
        )
    if args.profile:
        profiler = cProfile.Profile()
        profiler.enable()
        for i in range(args.profile):
            ours(asked[i % len(asked)])
        profiler.disable()
        if args.dump:
            profiler.dump_stats(str(args.dump))
        stats = pstats.Stats(profiler).strip_dirs()
        print(f"\ncProfile of {args.profile} searches (warm caches), per search = total / {args.profile}")
        stats.sort_stats("cumulative").print_stats(args.top)
        stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
