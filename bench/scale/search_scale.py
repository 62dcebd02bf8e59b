"""Search at 10k, 100k (and 1M) paragraphs against numpy, bm25s and sqlite-vec, in one process.

    python bench/scale/search_scale.py                      # 10,000 and 100,000 (what `make bench` runs)
    python bench/scale/search_scale.py --sizes 1000000 --populate   # a million: store and index only
    python bench/scale/search_scale.py --sizes 1000000      # then the measurement, reusing them
    python bench/scale/search_scale.py --report             # tables and plot from every size's saved results
    python bench/scale/search_scale.py --sizes 10000 --http 0 --passes 1   # quick

Each size runs in a child process of its own (its own SQLite store under data/bench/scale/, its own
index folder), so memory and cold start are that size's alone. Store and index are made once and
reused (bench/scale/scale_store.py describes the data). Each size's results are saved with the commit and
load average they come from in bench/results/search_scale-N.json; the tables and
docs/img/search_scale.png are drawn from every size saved there, so a 1M run need not redo 10k and
100k.

Arms, interleaved question by question in a shuffled order, each after a sweep of 64 MiB that leaves
nothing in the caches from the arm before, the question's vector given (embedding a question is
not timed here), each timed by the wall clock and by the process's
CPU time (on shared cores the wall clock also counts other processes' turns); questions are the first
SciFact queries (lexical side) and new draws from the vectors' mixture (vector side):
* ragsite `search_collection` lexical / vector / hybrid (most 10, around 0, floor 0), on the exact
  path and on the IVF path (IVF_MIN_PARAGRAPHS 1, IVF_NPROBE as configured); "lexical ranking" is the
  ranking that search uses alone (ids and scores of the top 10, as bm25s returns), and "bm25s + texts"
  is bm25s followed by the statement that reads its hits' texts (as a search must);
* numpy flat: the float32 matrix in memory, `M @ q` + argpartition;
* bm25s (numpy backend) indexed on the product's own terms, k1 1.2, b 0.75, lucene idf, scoring in the
  calling thread (`n_threads=0`); "bm25s pool" is the same with `n_threads=1`, a one-thread pool started
  for each question, which this bench measured before 2026-12-02;
* sqlite-vec: a `vec0(float[384])` table in memory, KNN query.
Also: recall@10 of the IVF path against the exact path (vector and hybrid), cold start (a fresh
process mapping the index and answering one search), and with `--http N`: under 4 client threads for
15 s each, the project's web tier (gunicorn from a warmed master, config/gunicorn_conf.py) with N workers
and with one, and N uvicorn workers: requests/s, p95, and the master's and each worker's RSS / PSS /
private memory (USS), with each gunicorn worker's USS over the one-worker server's PSS.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

# One BLAS thread, as a search process has once the local embedder is loaded (embedders.py), and so
# that the arms do not fight over the cores: every arm, ours and the baselines, runs under it.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "scale"))
from scale_http import http_phase, percentile  # noqa: E402
from scale_peers import bm25s_baseline, faiss_arms, kernel_arms, recalls, tantivy_arm  # noqa: E402
from scale_report import plot, table  # noqa: E402
from scale_stand_ins import GivenVectors  # noqa: E402
from scale_store import DIMENSIONS, WORK, Mixture, load_scifact, populate, provenance, setup_django  # noqa: E402

RESULTS = ROOT / "bench" / "results"
# Read before each timed arm: twice this machine's last-level cache (32 MiB).
SWEEP_BYTES = 64 << 20


# --- the child: one size -------------------------------------------------------------------------


def progress(n: int, message: str) -> None:
    print(f"[{n:,}] {time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def populate_child(n: int, args) -> dict:
    setup_django(n)
    corpus, _asked = load_scifact(args.dataset, args.questions)
    progress(n, "populating (or checking) the store and index")
    facts = populate(n, corpus, "all-MiniLM-L6-v2")
    progress(n, "store and index ready; the bm25s baseline's index next")
    from collections_app.models import Collection, Paragraph

    collection = Collection.objects.get(agent__agent_id="scale", name="scale")
    rows = Paragraph.objects.filter(collection=collection).order_by("ordinal")
    bm25s_baseline(n, collection, rows, facts, WORK)
    progress(n, f"populated: {json.dumps({k: v for k, v in facts.items() if k.endswith('_s')})}")
    return facts


def measure_child(n: int, args) -> dict:
    setup_django(n)
    from django.conf import settings

    from collections_app.index import ivf as ivf_module
    from collections_app.limits import MAX_ANSWER_CHARS
    from collections_app.models import Agent, Collection, Paragraph
    from collections_app.services import search as search_module
    from collections_app.services.search import approximate, search_collection
    from ragsite import embedding
    from ragsite.lexical import terms

    corpus, asked = load_scifact(args.dataset, args.questions)
    model = embedding.get_embedder("local").model if args.http else "all-MiniLM-L6-v2"
    progress(n, "populating (or checking) the store and index")
    facts = populate(n, corpus, model)
    progress(n, "store and index ready; loading the baselines")
    agent = Agent.objects.get(agent_id="scale")
    collection = Collection.objects.get(agent=agent, name="scale")
    # Questions are new draws from the store's own mixture (its centres, another generator). Until
    # 2026-12-02 they came from `Mixture(n, seed=11)`, whose centres are other random directions: such a
    # question is near no row, every row ties with ~1,000 others, and IVF recall measured that (0.674 at
    # 1M). That case is still reported, as "far from every row" (facts["recall_vector_ivf_far"]).
    question_vectors = Mixture(n).draw(len(asked), rng=np.random.default_rng(11))
    far_vectors = Mixture(n, seed=11).draw(len(asked))
    given = {q: v for q, v in zip(asked, question_vectors, strict=True)}
    embedding.get_embedder = lambda backend=None: GivenVectors(model, given)

    # Baselines, built in this process from the same rows, filled in place (a million rows: no list
    # of a million blobs, no second copy of the matrix).
    rows = Paragraph.objects.filter(collection=collection).order_by("ordinal")
    started = time.perf_counter()
    matrix = np.empty((n, DIMENSIONS), dtype=np.float32)
    for i, blob in enumerate(rows.values_list("embedding", flat=True).iterator(chunk_size=10000)):
        matrix[i] = np.frombuffer(blob, dtype="<f2")
    facts["numpy_load_s"] = time.perf_counter() - started
    retriever = bm25s_baseline(n, collection, rows, facts, WORK)
    progress(
        n,
        f"numpy matrix {facts['numpy_load_s']:.0f} s, bm25s indexed {facts['bm25s_index_s']:.0f} s"
        f" (loaded from the kept one: {facts.get('bm25s_load_s', 'no')})",
    )
    vocab = retriever.vocab_dict
    vec_db = None
    try:
        import pysqlite3 as sqlite_for_vec
        import sqlite_vec

        vec_db = sqlite_for_vec.connect(":memory:")
        vec_db.enable_load_extension(True)
        sqlite_vec.load(vec_db)
        vec_db.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding float[{DIMENSIONS}])")
        started = time.perf_counter()
        for block in range(0, n, 10000):
            vec_db.executemany(
                "INSERT INTO v(rowid, embedding) VALUES (?, ?)",
                [(i + 1, matrix[i].tobytes()) for i in range(block, min(n, block + 10000))],
            )
        facts["sqlite_vec_insert_s"] = time.perf_counter() - started
    except ImportError:
        facts["sqlite_vec"] = "not installed (pip install '.[bench]')"

    def ours(mode, ivf, nprobe=None):
        def run(q):
            settings.IVF_MIN_PARAGRAPHS = 1 if ivf else 0
            return search_collection(
                agent=agent,
                collection=collection,
                question=q,
                mode=mode,
                most=10,
                around=0,
                min_score=0.0,
                nprobe=nprobe,
                # Ten paragraphs, as the baselines return: the default budget (6,000 characters) cut
                # SciFact's ~1,500-character abstracts to 4-6 and recall against numpy to 0.45.
                max_chars=MAX_ANSWER_CHARS,
            )

        return run

    def numpy_flat(q):
        scores = matrix @ given[q]
        top = np.argpartition(-scores, 10)[:10]
        return top[np.argsort(-scores[top])]

    def bm25s_run(q, n_threads=0):
        tokens = [t for t in terms(q) if t in vocab] or ["__none__"]
        if tokens == ["__none__"]:
            return None
        # n_threads=0 scores in this thread; n_threads=1 (the arm "bm25s pool", this bench's baseline until
        # 2026-12-02) starts a one-thread pool for every question and scores in it.
        return retriever.retrieve([tokens], k=10, show_progress=False, n_threads=n_threads)

    def sqlite_vec_run(q):
        return vec_db.execute(
            "SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = 10", [given[q].tobytes()]
        ).fetchall()

    # The cost of a reader's own statistics (issue 15): BM25 straight from the mapped index, over all
    # rows and over a reader's view of half of them (df counted in the view, avgdl from a masked sum).
    from collections_app.models import CollectionBuilt
    from collections_app.services.indexes import mapped_index

    mapped = mapped_index(collection, CollectionBuilt.objects.get(collection=collection))[1]
    half = np.random.default_rng(5).random(n) < 0.5

    def bm25_all(q):
        return mapped.bm25(terms(q))

    def bm25_view(q):
        return mapped.bm25(terms(q), mapped.view(half))

    # Like for like with bm25s, which returns ten rows' ids and scores and reads no store: our lexical
    # ranking alone (what `search_collection` ranks with: pruned top-k, dense when pruning declines), and
    # bm25s followed by the one statement that reads its hits' texts, as a search must.
    from collections_app.index.bm25_top import best_rows
    from collections_app.services.search.rows import stored_rows
    from ragsite.top import top_rows

    def ranking(q):  # search_collection's lexical ranking: pruned, else every row's score (its `_lexical`)
        question = terms(q)
        found = best_rows(mapped, question, 10, None, search_module.lexical_score)
        return (
            found[0]
            if found is not None
            else top_rows(search_module.lexical_score(*mapped.lexical(question, None)), None, 10)
        )

    def bm25s_texts(q):
        found = bm25s_run(q)
        return None if found is None else stored_rows([int(mapped.row_paragraph[r]) for r in found[0][0]])

    arms = {
        "bm25 all rows": bm25_all,
        "bm25 reader view": bm25_view,
        "lexical ranking": ranking,
        "bm25s + texts": bm25s_texts,
        "lexical": ours("lexical", False),
        "vector": ours("vector", False),
        "hybrid": ours("hybrid", False),
        "vector IVF": ours("vector", True),
        "hybrid IVF": ours("hybrid", True),
        "numpy flat": numpy_flat,
        "bm25s": bm25s_run,
        "bm25s pool": lambda q: bm25s_run(q, n_threads=1),
    }
    # The same IVF at other nprobe (the request's override): what recall@10 costs on these questions.
    probed = [f"vector IVF nprobe {k}" for k in args.nprobes]
    arms.update({name: ours("vector", True, k) for name, k in zip(probed, args.nprobes, strict=True)})
    if vec_db is not None:
        arms["sqlite-vec"] = sqlite_vec_run
    # The peers (issue 29): faiss over the same vectors (IVFFlat over ragsite's own lists), tantivy over
    # the same texts, and ragsite's kernels alone (bench/scale/scale_peers.py).
    lists = mapped.ivf or approximate.ivf_of(
        collection, CollectionBuilt.objects.get(collection=collection), "bench", mapped
    )
    peers = faiss_arms(n, matrix, lists, given, WORK, facts)
    peers.update(tantivy_arm(n, rows.values_list("text", flat=True).iterator(chunk_size=10000), WORK, facts))
    peers.update(kernel_arms(mapped, lists, given, approximate.CANDIDATE_DEPTH))
    arms.update(peers)
    # Warm: map the index, build the IVF (its build time is reported, not timed as a search).
    started = time.perf_counter()
    arms["hybrid"](asked[0])
    facts["first_search_s"] = time.perf_counter() - started
    started = time.perf_counter()
    arms["hybrid IVF"](asked[0])
    facts["ivf_build_s"] = time.perf_counter() - started
    # The IVF written with the build is mapped; one built in this process (an older index) is cached.
    cached = approximate._ivf_cache.get(collection.pk)
    ivf = cached[1] if cached is not None else mapped.ivf
    facts["ivf_lists"], facts["nprobe"] = ivf.nlist, int(settings.IVF_NPROBE) or ivf.nprobe
    progress(
        n,
        f"sqlite-vec {facts.get('sqlite_vec_insert_s', 0):.0f} s; first search "
        f"{facts['first_search_s']:.1f} s;"
        f" timing {len(arms)} arms x {len(asked)} questions x {args.passes} passes",
    )
    started_arms = time.perf_counter()
    timings = {name: [] for name in arms}
    # The process's CPU time too (every thread: bm25s's pool scores in one of its own): on a shared machine a
    # wall-clock p50 is much of it other processes' turns (it moved 0.78-0.99x between runs).
    cpu = {name: [] for name in arms}
    answers = {name: {} for name in ("vector", "hybrid", "vector IVF", "hybrid IVF", *probed)}
    names = list(arms)
    # Each arm starts with the processor's caches cleared of what the arm before it read: several arms
    # read the same question's postings or its hits' texts, and with a fixed cyclic order (this bench's
    # until 2026-12-02) an arm that followed such an arm found them cached. Moving an arm that reads the
    # hits' texts in front of `lexical` took it from 1.50x to 1.12x bm25s. The order is shuffled too.
    sweep = np.ones(SWEEP_BYTES // 8)
    shuffle = np.random.default_rng(3)
    for _pass in range(args.passes):
        for q in asked:
            for name in shuffle.permutation(names):
                sweep.sum()
                started, started_cpu = time.perf_counter(), time.process_time()
                result = arms[name](q)
                timings[name].append(time.perf_counter() - started)
                cpu[name].append(time.process_time() - started_cpu)
                if name in answers:
                    answers[name][q] = [p["first"] for p in result["paragraphs"]]
    facts["arms_s"] = time.perf_counter() - started_arms
    progress(n, f"arms timed in {facts['arms_s']:.0f} s; cold start and HTTP next")
    facts["latency_ms"] = {
        name: {"p50": percentile(v, 50), "p95": percentile(v, 95)} for name, v in timings.items()
    }
    # Hybrid baseline: the two baselines one after the other.
    both = [a + b for a, b in zip(timings["numpy flat"], timings["bm25s"], strict=True)]
    facts["latency_ms"]["numpy flat + bm25s"] = {"p50": percentile(both, 50), "p95": percentile(both, 95)}
    cpu["numpy flat + bm25s"] = [a + b for a, b in zip(cpu["numpy flat"], cpu["bm25s"], strict=True)]
    facts["cpu_ms"] = {name: {"p50": percentile(v, 50)} for name, v in cpu.items()}

    def recall(approx, exact):
        found = [
            len(set(answers[approx][q]) & set(answers[exact][q])) / max(1, len(answers[exact][q]))
            for q in asked
        ]
        return float(np.mean(found))

    facts["recall_peers"] = recalls(peers, asked, numpy_flat)
    facts["recall_vector_ivf"] = recall("vector IVF", "vector")
    facts["recall_hybrid_ivf"] = recall("hybrid IVF", "hybrid")
    facts["recall_vector_ivf_by_nprobe"] = {
        str(k): recall(name, "vector") for name, k in zip(probed, args.nprobes, strict=True)
    }
    # The same IVF for questions near no row (the draws this bench used before 2026-12-02), from the matrix.
    far = ivf_module.recall_by_nprobe(matrix, ivf, far_vectors, 10)  # one exact scan a question, every nprobe
    facts["recall_vector_ivf_far"] = float(far[facts["nprobe"] - 1])
    facts["recall_vector_ivf_far_by_nprobe"] = {
        str(k): float(far[min(k, ivf.nlist) - 1]) for k in args.nprobes
    }
    # Our exact vector arm against the numpy baseline (positions are 1-based rows here: all rows readable).
    facts["recall_vector_vs_numpy"] = float(
        np.mean([len(set(answers["vector"][q]) & {int(r) + 1 for r in numpy_flat(q)}) / 10 for q in asked])
    )
    facts["n"] = n
    facts["cold_start_s"] = cold_start(n, args)
    progress(n, f"cold start {min(facts['cold_start_s']):.2f} s (best of 3)")
    if args.http:
        facts["http"] = http_phase(n, args, model, asked)
    return facts


def cold_start(n: int, args) -> list[float]:
    """Fresh processes: from a set-up Django to the first lexical answer (maps the index), in seconds."""
    times = []
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, __file__, "--cold", str(n), "--dataset", str(args.dataset)],
            capture_output=True,
            text=True,
            timeout=600,
            check=True,
        )
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return times


def cold_child(n: int, args) -> None:
    setup_django(n)
    from collections_app.models import Agent, Collection
    from collections_app.services.search import search_collection

    agent = Agent.objects.get(agent_id="scale")
    collection = Collection.objects.get(agent=agent, name="scale")
    started = time.perf_counter()
    search_collection(
        agent=agent, collection=collection, question="cell growth in tumours", mode="lexical", most=10
    )
    print(time.perf_counter() - started)


# --- the parent ----------------------------------------------------------------------------------


def saved_results() -> list[dict]:
    """Every size's last saved results, smallest first."""
    found = [json.loads(path.read_text()) for path in RESULTS.glob("search_scale-*.json")]
    return sorted(found, key=lambda r: r["n"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument(
        "--dataset",
        type=Path,
        default=Path(os.environ.get("SCIFACT", ROOT.parent / "shared" / "datasets" / "scifact")),
        help="a BEIR SciFact folder (corpus.jsonl.gz, queries.jsonl); default $SCIFACT",
    )
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument(
        "--http",
        type=int,
        default=4,
        help="web workers for the HTTP phase (gunicorn, and uvicorn); 0 skips it",
    )
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "img" / "search_scale.png")
    parser.add_argument(
        "--nprobes",
        type=int,
        nargs="*",
        default=[16, 32, 64],
        help="further vector IVF arms at these nprobe (the build measures its own for the main arm)",
    )
    parser.add_argument(
        "--populate",
        action="store_true",
        help="only make (or check) each size's store and index, measuring no search",
    )
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cold", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--report",
        action="store_true",
        help="print the tables and draw the plot from every size's saved results, measuring nothing",
    )
    args = parser.parse_args()
    if args.report:
        results = saved_results()
        if not results:
            raise SystemExit(f"no saved results in {RESULTS}: run a size first")
        print(table(results))
        plot(results, args.plot)
        return None
    if args.cold:
        return cold_child(args.cold, args)
    if args.one:
        print(json.dumps(populate_child(args.one, args) if args.populate else measure_child(args.one, args)))
        return None
    for n in args.sizes:
        command = [
            sys.executable,
            __file__,
            "--one",
            str(n),
            "--dataset",
            str(args.dataset),
            "--questions",
            str(args.questions),
            "--passes",
            str(args.passes),
            "--http",
            str(args.http),
            "--nprobes",
            *map(str, args.nprobes),
        ]
        started, at = time.perf_counter(), provenance()
        # The child's progress lines (stderr) pass straight through: a million rows take a while.
        out = subprocess.run(
            command + (["--populate"] if args.populate else []),
            stdout=subprocess.PIPE,
            text=True,
            check=False,
        )
        if out.returncode:
            raise SystemExit(f"size {n} failed (its error is above)")
        facts = json.loads(out.stdout.strip().splitlines()[-1])
        facts["run"] = {**at, "load_after": list(os.getloadavg()), "wall_s": time.perf_counter() - started}
        if args.populate:
            print(json.dumps(facts, indent=1))
            continue
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / f"search_scale-{n}.json").write_text(json.dumps(facts, indent=1) + "\n")
    if args.populate:
        return None
    results = saved_results()
    print(table(results))
    plot(results, args.plot)
    print(f"\nplot: {args.plot}")
    return None


if __name__ == "__main__":
    main()
