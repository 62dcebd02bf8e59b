"""Search at 10k, 100k (and 1M) paragraphs against numpy, bm25s and sqlite-vec, in one process.

    python bench/search_scale.py                      # 10,000 and 100,000 (what `make bench` runs)
    python bench/search_scale.py --sizes 1000000      # a million (several minutes, a few GB)
    python bench/search_scale.py --sizes 10000 --http 0 --passes 1   # quick

Each size runs in a child process of its own (its own SQLite store under data/bench/scale/, its own
index folder), so memory and cold start are that size's alone; the parent prints the tables and
draws docs/img/search_scale.png.

Data: paragraph j is SciFact abstract j mod 5,183 (title and text); from the second pass over the
corpus on, three words from a pool of 100,000 pseudo-words are appended, so texts differ. Ten
paragraphs a document. Vectors are synthetic unit vectors (384 dimensions) from a mixture of about
sqrt(N) Gaussian clusters around 32 super-centres; questions are the first SciFact queries (lexical
side) and new draws from the mixture (vector side). The rows are written straight into the store
(as an import would), then the build's index is written by the product's own `write_index`.

Arms, interleaved question by question in rotating order, the question's vector given (embedding a
question is timed separately by bench/embed_speed.py), each timed by the wall clock and by the process's
CPU time (on shared cores the wall clock also counts other processes' turns):
* ragsite `search_collection` lexical / vector / hybrid (most 10, around 0, floor 0), on the exact
  path and on the IVF path (IVF_MIN_PARAGRAPHS 1, IVF_NPROBE as configured);
* numpy flat: the float32 matrix in memory, `M @ q` + argpartition;
* bm25s (numpy backend) indexed on the product's own terms, k1 1.2, b 0.75, lucene idf, scoring in the
  calling thread (`n_threads=0`); "bm25s pool" is the same with `n_threads=1`, a one-thread pool started
  for each question, which this bench measured before 2026-12-02;
* sqlite-vec: a `vec0(float[384])` table in memory, KNN query.
Also: recall@10 of the IVF path against the exact path (vector and hybrid), cold start (a fresh
process mapping the index and answering one search), and with `--http N`: N uvicorn workers under
4 client threads for 15 s, requests/s, p95 and each worker's RSS / PSS / private memory (USS).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

# One BLAS thread, as a search process has once the local embedder is loaded (embedders.py), and so
# that the arms do not fight over the cores: every arm, ours and the baselines, runs under it.
for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
WORK = ROOT / "data" / "bench" / "scale"
DIMENSIONS = 384
PER_DOCUMENT = 10


# --- data ----------------------------------------------------------------------------------------


def load_scifact(dataset: Path, questions: int) -> tuple[list[str], list[str]]:
    texts = []
    with gzip.open(dataset / "corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            texts.append(f"{doc.get('title') or ''}\n\n{doc.get('text') or ''}".strip())
    asked = []
    with open(dataset / "queries.jsonl", encoding="utf-8") as handle:
        for line in handle:
            asked.append(json.loads(line)["text"])
            if len(asked) >= questions:
                break
    return texts, asked


def paragraph_text(j: int, corpus: list[str], rng_words: np.ndarray) -> str:
    base = corpus[j % len(corpus)]
    if j < len(corpus):
        return base
    words = rng_words[(j * 3) % len(rng_words) : (j * 3) % len(rng_words) + 3]
    return base + " " + " ".join(f"zq{w:05d}" for w in words)


class Mixture:
    """Unit vectors around ~sqrt(N) cluster centres, themselves around 32 super-centres."""

    def __init__(self, n: int, seed: int = 7):
        self.rng = np.random.default_rng(seed)
        supers = self._unit(self.rng.standard_normal((32, DIMENSIONS)))
        k = max(1, int(np.sqrt(n)))
        self.centres = self._unit(supers[self.rng.integers(0, 32, k)] + self.rng.standard_normal((k, DIMENSIONS)) * 0.06)
        self.spread = self.rng.uniform(0.6, 1.2, k)
        sizes = self.rng.lognormal(0, 1, k)
        self.weights = sizes / sizes.sum()

    @staticmethod
    def _unit(x):
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    def draw(self, count: int) -> np.ndarray:
        which = self.rng.choice(len(self.centres), size=count, p=self.weights)
        noise = self.rng.standard_normal((count, DIMENSIONS)).astype(np.float32)
        return self._unit(self.centres[which] + noise * (self.spread[which, None] / np.sqrt(DIMENSIONS)) * 1.2)


# --- the child: one size -------------------------------------------------------------------------


def setup_django(n: int) -> None:
    WORK.mkdir(parents=True, exist_ok=True)
    os.environ["DATABASE_URL"] = f"sqlite:///{WORK / f'scale-{n}.sqlite3'}"
    os.environ["INDEX_DIR"] = str(WORK / f"indexes-{n}")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragsite.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ["EMBED_BACKEND"] = "local"
    import django

    django.setup()


def insert_collection(n: int, corpus: list[str], model: str) -> tuple[object, dict]:
    """The agent "scale" and its N-paragraph collection "scale" in the store, written as an import
    would (reused when already built); bench/store_bytes.py writes the same rows on either database."""
    from django.core.management import call_command
    from django.db import transaction
    from django.utils import timezone

    from collections_app.interchange import fingerprint
    from collections_app.models import Agent, Collection, CollectionBuilt, Document, Paragraph
    from collections_app.services.agents import create_agent, create_collection
    from collections_app.vector_codec import encode

    call_command("migrate", verbosity=0)
    agent = Agent.objects.filter(agent_id="scale").first() or create_agent(agent_id="scale")[0]
    collection = Collection.objects.filter(agent=agent, name="scale").first()
    facts = {}
    if collection is None or not CollectionBuilt.objects.filter(collection=collection).exists():
        collection = collection or create_collection(agent=agent, name="scale", method="fixed", size=4000)
        mixture = Mixture(n)
        words = np.random.default_rng(3).integers(0, 100_000, 3 * n + 3)
        started = time.perf_counter()
        with transaction.atomic():
            documents = Document.objects.bulk_create(
                [Document(collection=collection, name=f"d{d:07d}.md", paragraph_count=PER_DOCUMENT,
                          built_method="fixed", built_model=model) for d in range((n + PER_DOCUMENT - 1) // PER_DOCUMENT)],
                batch_size=2000,
            )
            if not all(d.pk for d in documents):
                documents = list(Document.objects.filter(collection=collection).order_by("name"))
            for block in range(0, n, 5000):
                count = min(5000, n - block)
                vectors = mixture.draw(count)
                rows = []
                for offset in range(count):
                    j = block + offset
                    text = paragraph_text(j, corpus, words)
                    rows.append(Paragraph(
                        agent_id=agent.agent_id, collection=collection, document=documents[j // PER_DOCUMENT],
                        ordinal=j, index=j % PER_DOCUMENT, text=text, start_char=0, end_char=len(text),
                        token_count=None, fingerprint=fingerprint(text), embedding=encode(vectors[offset]),
                    ))
                Paragraph.objects.bulk_create(rows, batch_size=1000)
            CollectionBuilt.objects.update_or_create(collection=collection, defaults=dict(
                agent_id=agent.agent_id, model=model, dimensions=DIMENSIONS, method="fixed", passages=n,
                built_at=timezone.now(), refused=[]))
        facts["insert_s"] = time.perf_counter() - started
    return collection, facts


def populate(n: int, corpus: list[str], model: str) -> dict:
    """The store and index of an N-paragraph collection (reused when already there)."""
    from collections_app.models import CollectionBuilt
    from collections_app.services.indexes import write_index

    collection, facts = insert_collection(n, corpus, model)
    from collections_app.services.indexes import build_key, collection_root

    built = CollectionBuilt.objects.get(collection=collection)
    folder = collection_root(collection.pk) / build_key(built)
    if not folder.exists():
        started = time.perf_counter()
        write_index(collection=collection)
        facts["index_write_s"] = time.perf_counter() - started
    facts["index_bytes"] = sum(p.stat().st_size for p in folder.iterdir())
    facts["index_files"] = {p.name: p.stat().st_size for p in folder.iterdir()}
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the file's size then holds every row
        cursor.execute("SELECT sum(length(text)), sum(length(embedding)) FROM agents_chunks")
        text_bytes, vector_bytes = cursor.fetchone()
    facts["db_bytes"] = Path(os.environ["DATABASE_URL"].removeprefix("sqlite:///")).stat().st_size
    facts["text_bytes"], facts["vector_bytes"] = int(text_bytes), int(vector_bytes)
    return facts


class GivenVectors:
    """Stands in for the embedder: the question's precomputed vector, under the collection's model name."""

    backend = "bench"

    def __init__(self, model: str, vectors: dict[str, np.ndarray]):
        self.model, self.vectors, self.dimensions, self.window = model, vectors, DIMENSIONS, None

    def embed_with_usage(self, texts):
        from ragsite.embedders import Embedded

        return Embedded(np.stack([self.vectors[t] for t in texts]), None)


def percentile(values, q):
    return float(np.percentile(np.asarray(values) * 1000, q))


def measure_child(n: int, args) -> dict:
    setup_django(n)
    from django.conf import settings

    from collections_app.models import Agent, Collection, Paragraph
    from collections_app.services import search as search_module
    from collections_app.services.search import search_collection
    from ragsite import embedding
    from ragsite.lexical import terms

    corpus, asked = load_scifact(args.dataset, args.questions)
    model = embedding.get_embedder("local").model if args.http else "all-MiniLM-L6-v2"
    facts = populate(n, corpus, model)
    agent = Agent.objects.get(agent_id="scale")
    collection = Collection.objects.get(agent=agent, name="scale")
    question_vectors = Mixture(n, seed=11).draw(len(asked))
    given = {q: v for q, v in zip(asked, question_vectors, strict=True)}
    embedding.get_embedder = lambda backend=None: GivenVectors(model, given)

    # Baselines, built in this process from the same rows.
    rows = Paragraph.objects.filter(collection=collection).order_by("ordinal")
    started = time.perf_counter()
    blobs = list(rows.values_list("embedding", flat=True).iterator(chunk_size=10000))
    matrix = np.frombuffer(b"".join(bytes(b) for b in blobs), dtype="<f2").astype(np.float32).reshape(n, DIMENSIONS)
    del blobs
    facts["numpy_load_s"] = time.perf_counter() - started
    import bm25s

    started = time.perf_counter()
    retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
    retriever.index([terms(t) for t in rows.values_list("text", flat=True).iterator(chunk_size=10000)],
                    show_progress=False)
    facts["bm25s_index_s"] = time.perf_counter() - started
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
            vec_db.executemany("INSERT INTO v(rowid, embedding) VALUES (?, ?)",
                               [(i + 1, matrix[i].tobytes()) for i in range(block, min(n, block + 10000))])
        facts["sqlite_vec_insert_s"] = time.perf_counter() - started
    except ImportError:
        facts["sqlite_vec"] = "not installed (pip install '.[bench]')"

    def ours(mode, ivf):
        def run(q):
            settings.IVF_MIN_PARAGRAPHS = 1 if ivf else 0
            return search_collection(agent=agent, collection=collection, question=q, mode=mode, most=10, around=0,
                                     min_score=0.0)
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
        return vec_db.execute("SELECT rowid, distance FROM v WHERE embedding MATCH ? AND k = 10",
                              [given[q].tobytes()]).fetchall()

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

    arms = {
        "bm25 all rows": bm25_all, "bm25 reader view": bm25_view,
        "lexical": ours("lexical", False), "vector": ours("vector", False), "hybrid": ours("hybrid", False),
        "vector IVF": ours("vector", True), "hybrid IVF": ours("hybrid", True),
        "numpy flat": numpy_flat, "bm25s": bm25s_run, "bm25s pool": lambda q: bm25s_run(q, n_threads=1),
    }
    if vec_db is not None:
        arms["sqlite-vec"] = sqlite_vec_run
    # Warm: map the index, build the IVF (its build time is reported, not timed as a search).
    started = time.perf_counter()
    arms["hybrid"](asked[0])
    facts["first_search_s"] = time.perf_counter() - started
    started = time.perf_counter()
    arms["hybrid IVF"](asked[0])
    facts["ivf_build_s"] = time.perf_counter() - started
    # The IVF written with the build is mapped; one built in this process (an older index) is cached.
    cached = search_module._ivf_cache.get(collection.pk)
    ivf = cached[1] if cached is not None else mapped.ivf
    facts["ivf_lists"], facts["nprobe"] = ivf.nlist, int(settings.IVF_NPROBE) or ivf.nprobe
    timings = {name: [] for name in arms}
    # The process's CPU time too (every thread: bm25s's pool scores in one of its own): on a shared machine a
    # wall-clock p50 is much of it other processes' turns (it moved 0.78-0.99x between runs).
    cpu = {name: [] for name in arms}
    answers = {name: {} for name in ("vector", "hybrid", "vector IVF", "hybrid IVF")}
    names = list(arms)
    for _pass in range(args.passes):
        for number, q in enumerate(asked):
            order = names[number % len(names):] + names[: number % len(names)]
            for name in order:
                started, started_cpu = time.perf_counter(), time.process_time()
                result = arms[name](q)
                timings[name].append(time.perf_counter() - started)
                cpu[name].append(time.process_time() - started_cpu)
                if name in answers:
                    answers[name][q] = [p["first"] for p in result["paragraphs"]]
    facts["latency_ms"] = {name: {"p50": percentile(v, 50), "p95": percentile(v, 95)} for name, v in timings.items()}
    # Hybrid baseline: the two baselines one after the other.
    both = [a + b for a, b in zip(timings["numpy flat"], timings["bm25s"], strict=True)]
    facts["latency_ms"]["numpy flat + bm25s"] = {"p50": percentile(both, 50), "p95": percentile(both, 95)}
    cpu["numpy flat + bm25s"] = [a + b for a, b in zip(cpu["numpy flat"], cpu["bm25s"], strict=True)]
    facts["cpu_ms"] = {name: {"p50": percentile(v, 50)} for name, v in cpu.items()}

    def recall(approx, exact):
        found = [len(set(answers[approx][q]) & set(answers[exact][q])) / max(1, len(answers[exact][q])) for q in asked]
        return float(np.mean(found))

    facts["recall_vector_ivf"] = recall("vector IVF", "vector")
    facts["recall_hybrid_ivf"] = recall("hybrid IVF", "hybrid")
    # Our exact vector arm against the numpy baseline (positions are 1-based rows here: all rows readable).
    facts["recall_vector_vs_numpy"] = float(np.mean(
        [len(set(answers["vector"][q]) & {int(r) + 1 for r in numpy_flat(q)}) / 10 for q in asked]))
    facts["n"] = n
    facts["cold_start_s"] = cold_start(n, args)
    if args.http:
        facts["http"] = http_phase(n, args, model, asked)
    return facts


def cold_start(n: int, args) -> list[float]:
    """Fresh processes: from a set-up Django to the first lexical answer (maps the index), in seconds."""
    times = []
    for _ in range(3):
        out = subprocess.run([sys.executable, __file__, "--cold", str(n), "--dataset", str(args.dataset)],
                             capture_output=True, text=True, timeout=600, check=True)
        times.append(float(out.stdout.strip().splitlines()[-1]))
    return times


def cold_child(n: int, args) -> None:
    setup_django(n)
    from collections_app.models import Agent, Collection
    from collections_app.services.search import search_collection

    agent = Agent.objects.get(agent_id="scale")
    collection = Collection.objects.get(agent=agent, name="scale")
    started = time.perf_counter()
    search_collection(agent=agent, collection=collection, question="cell growth in tumours", mode="lexical", most=10)
    print(time.perf_counter() - started)


def smaps(pid: int) -> dict[str, int]:
    figures = {}
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) >= 3 and parts[1].isdigit():
                figures[parts[0].rstrip(":")] = int(parts[1]) * 1024
    return {"rss": figures.get("Rss", 0), "pss": figures.get("Pss", 0),
            "uss": figures.get("Private_Clean", 0) + figures.get("Private_Dirty", 0)}


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (uvicorn's workers sit under it, or under its multiprocessing helper)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found.append(int(child))
            found.extend(descendants(int(child)))
    # Only the Python processes that serve (not the resource tracker, which maps nothing).
    return [p for p in found if "uvicorn" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")
            or "multiprocessing.spawn" in Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]


def http_phase(n: int, args, model: str, asked: list[str]) -> dict:
    """`--http` uvicorn workers on 127.0.0.1, 4 client threads for 15 s; the server embeds each question."""
    import httpx

    from collections_app.models import Agent
    from collections_app.services.agents import issue_key

    raw = issue_key(agent=Agent.objects.get(agent_id="scale"))
    raw = raw[1] if isinstance(raw, tuple) else raw
    port = 8790 + n % 97
    env = {**os.environ, "EMBED_BACKEND": "local"}
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "ragsite.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--workers", str(args.http), "--log-level", "warning"], cwd=ROOT, env=env,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/api/v1/collections/scale/search"
    headers = {"Authorization": f"Bearer {raw}"}
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/v1/collections/", headers=headers, timeout=2)
                break
            except httpx.HTTPError:
                time.sleep(0.5)
        # Warm every worker (model load, index map) before the timed phase.
        warm_started = time.perf_counter()
        for q in asked[: 4 * args.http]:
            httpx.post(url, json={"question": q, "most": 10, "around": 0, "min_score": 0}, headers=headers, timeout=120)
        warm = time.perf_counter() - warm_started
        latencies, errors = [], []
        stop = time.time() + 15

        def client(offset):
            with httpx.Client(headers=headers, timeout=30) as session:
                i = offset
                while time.time() < stop:
                    started = time.perf_counter()
                    response = session.post(url, json={"question": asked[i % len(asked)], "most": 10, "around": 0,
                                                       "min_score": 0})
                    latencies.append(time.perf_counter() - started)
                    if response.status_code != 200:
                        errors.append(response.status_code)
                    i += 4

        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        workers = [smaps(pid) for pid in descendants(server.pid)]
        return {"workers": args.http, "requests_per_s": len(latencies) / 15, "p50_ms": percentile(latencies, 50),
                "p95_ms": percentile(latencies, 95), "errors": len(errors), "warm_s": warm, "memory": workers}
    finally:
        server.terminate()
        server.wait(timeout=30)


# --- the parent ----------------------------------------------------------------------------------


def table(results: list[dict]) -> str:
    lines = []
    for facts in results:
        n = facts["n"]
        lat = facts["latency_ms"]
        lines.append(f"\n### N = {n:,}\n")
        lines.append(f"Store {facts['db_bytes'] / n:,.0f} B/paragraph (text {facts['text_bytes'] / n:,.0f}, "
                     f"vectors {facts['vector_bytes'] / n:,.0f}); index files {facts['index_bytes'] / n:,.0f} "
                     f"B/paragraph; index written in {facts.get('index_write_s', float('nan')):.1f} s; cold start "
                     f"(fresh process, first lexical answer) {min(facts['cold_start_s']):.3f} s; IVF "
                     f"{facts['ivf_lists']} lists, nprobe {facts['nprobe']}, built in {facts['ivf_build_s']:.1f} s.\n")
        cpu = facts.get("cpu_ms", {})
        lines.append("| arm | p50 ms | p95 ms | baseline | baseline p50 | ratio p50 | CPU p50 ms: arm / baseline, ratio |")
        lines.append("|---|---|---|---|---|---|---|")
        pairs = [("bm25 reader view", "bm25 all rows"), ("lexical", "bm25s"), ("lexical", "bm25s pool"), ("vector", "numpy flat"), ("vector", "sqlite-vec"),
                 ("vector IVF", "numpy flat"), ("hybrid", "numpy flat + bm25s"), ("hybrid IVF", "numpy flat + bm25s")]
        for ours, base in pairs:
            if base not in lat:
                continue
            on_cpu = (f"{cpu[ours]['p50']:.2f} / {cpu[base]['p50']:.2f}, {cpu[ours]['p50'] / cpu[base]['p50']:.2f}×"
                      if ours in cpu and base in cpu else "—")
            lines.append(f"| {ours} | {lat[ours]['p50']:.2f} | {lat[ours]['p95']:.2f} | {base} | "
                         f"{lat[base]['p50']:.2f} | {lat[ours]['p50'] / lat[base]['p50']:.2f}× | {on_cpu} |")
        lines.append(f"\nrecall@10 against the exact path: vector IVF {facts['recall_vector_ivf']:.3f}, "
                     f"hybrid IVF (exact candidates) {facts['recall_hybrid_ivf']:.3f}; exact vector against numpy "
                     f"{facts['recall_vector_vs_numpy']:.3f}.")
        if "http" in facts:
            h = facts["http"]
            mem = "; ".join(f"RSS {m['rss'] / 2**20:.0f} / PSS {m['pss'] / 2**20:.0f} / USS {m['uss'] / 2**20:.0f} MiB"
                            for m in h["memory"])
            lines.append(f"\nHTTP, {h['workers']} uvicorn workers, 4 clients, question embedded by the server: "
                         f"{h['requests_per_s']:.1f} req/s, p50 {h['p50_ms']:.1f} ms, p95 {h['p95_ms']:.1f} ms, "
                         f"{h['errors']} errors. Workers: {mem}.")
    return "\n".join(lines)


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = [r["n"] for r in results]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name in ("lexical", "bm25s", "vector", "vector IVF", "numpy flat", "sqlite-vec", "hybrid", "hybrid IVF",
                 "numpy flat + bm25s"):
        if all(name in r["latency_ms"] for r in results):
            style = "--" if name in ("bm25s", "numpy flat", "sqlite-vec", "numpy flat + bm25s") else "-"
            ax.plot(sizes, [r["latency_ms"][name]["p50"] for r in results], style, marker="o", label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("paragraphs")
    ax.set_ylabel("p50 latency, ms (in-process, question vector given)")
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--dataset", type=Path, default=Path(os.environ.get("SCIFACT", ROOT / "data" / "scifact")),
                        help="a BEIR SciFact folder (corpus.jsonl.gz, queries.jsonl); default $SCIFACT")
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--http", type=int, default=4, help="uvicorn workers for the HTTP phase; 0 skips it")
    parser.add_argument("--plot", type=Path, default=ROOT / "docs" / "img" / "search_scale.png")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cold", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--report", action="store_true",
                        help="print the tables and draw the plot from the sizes' saved results, measuring nothing")
    args = parser.parse_args()
    if args.report:
        results = [json.loads((WORK / f"results-{n}.json").read_text()) for n in sorted(args.sizes)]
        print(table(results))
        plot(results, args.plot)
        return None
    if args.cold:
        return cold_child(args.cold, args)
    if args.one:
        print(json.dumps(measure_child(args.one, args)))
        return None
    results = []
    for n in args.sizes:
        command = [sys.executable, __file__, "--one", str(n), "--dataset", str(args.dataset), "--questions",
                   str(args.questions), "--passes", str(args.passes), "--http", str(args.http)]
        out = subprocess.run(command, capture_output=True, text=True, check=False)
        if out.returncode:
            raise SystemExit(f"size {n} failed:\n{out.stderr[-4000:]}")
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
        (WORK / f"results-{n}.json").write_text(json.dumps(results[-1], indent=1))
    print(table(results))
    plot(sorted(results, key=lambda r: r["n"]), args.plot)
    print(f"\nplot: {args.plot}")
    return None


if __name__ == "__main__":
    main()
