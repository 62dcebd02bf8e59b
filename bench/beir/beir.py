"""Retrieval quality on a BEIR dataset, through the real build and search path.

    python bench/beir/beir.py ../shared/datasets/scifact --mode hybrid --split test
    python bench/beir/beir.py ../shared/datasets/scifact --mode hybrid --split train --sweep
    python bench/beir/beir.py ../shared/datasets/scifact --mode vector --split test --ivf --nprobe 8
    python bench/beir/beir.py ../shared/datasets/scifact --mode hybrid --split test --analyzer english

Each corpus document (title and text) becomes one file of a collection folder; the
collection is built by `build_collection` with the configured embedder (the local
all-MiniLM-L6-v2 unless EMBED_BACKEND says otherwise; `lexical` mode builds with
none), and every query is asked through `search_collection`, unfloored, with no
neighbours, 100 deep. Prints `nDCG@10 <value>` and `recall@100 <value>`.
`--ivf` searches through the IVF approximate path whatever the collection's size
(IVF_MIN_PARAGRAPHS=1), scoring `--nprobe` lists (default: the nprobe the build measured); the IVF is built by
a warm-up search before the timing starts, and its build time is reported.

The scratch store lives under data/bench/ and is reused: a second run over the
same corpus finds every document unchanged and embeds nothing; embeddings are also
kept by text under data/embeddings/ (bench/common/embedding_cache.py), so a fresh store or
another benchmark over the same texts does not embed them again.
"""

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.common import results  # noqa: E402
from ragsite import embedding, fusion  # noqa: E402


def read_corpus(dataset: Path) -> dict[str, tuple[str, str]]:
    """A BEIR corpus: document id -> (title, text)."""
    corpus = {}
    with gzip.open(dataset / "corpus.jsonl.gz", "rt", encoding="utf-8") as handle:
        for line in handle:
            doc = json.loads(line)
            corpus[doc["_id"]] = (doc.get("title") or "", doc.get("text") or "")
    return corpus


def read_queries(dataset: Path) -> dict[str, str]:
    """A BEIR query file: query id -> text (metadata is never shown to the retriever)."""
    with open(dataset / "queries.jsonl", encoding="utf-8") as handle:
        return {query["_id"]: query["text"] for query in map(json.loads, handle)}


def load(dataset: Path, split: str):
    corpus, queries = read_corpus(dataset), read_queries(dataset)
    qrels: dict[str, dict[str, float]] = {}
    with open(dataset / "qrels" / f"{split}.tsv", encoding="utf-8") as handle:
        next(handle)
        for line in handle:
            qid, did, score = line.rstrip("\n").split("\t")
            if float(score) > 0:
                qrels.setdefault(qid, {})[did] = float(score)
    return corpus, {q: queries[q] for q in qrels}, qrels


def memoised(embedder):
    class Memo:
        def __init__(self):
            self.seen = {}

        def __getattr__(self, name):
            return getattr(embedder, name)

        def embed_with_usage(self, texts):
            key = tuple(texts)
            if key not in self.seen:
                self.seen[key] = embedder.embed_with_usage(texts)
            return self.seen[key]

    memo = Memo()
    return lambda backend=None: memo


def cached_embedder(embedder, path: Path):
    """The embedder with a file of vectors by text digest: a second build of the same texts embeds nothing."""
    import hashlib

    store = dict(np.load(path)) if path.exists() else {}

    class Cached:
        def __getattr__(self, name):
            return getattr(embedder, name)

        def embed_with_usage(self, texts):
            from ragsite.embedders import Embedded

            keys = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
            missing = [t for t, k in zip(texts, keys, strict=True) if k not in store]
            if missing:
                fresh = embedder.embed_with_usage(missing).vectors
                for text, vector in zip(missing, fresh, strict=True):
                    store[hashlib.sha1(text.encode()).hexdigest()] = np.asarray(vector, dtype=np.float32)
                if (
                    time.monotonic() - saved[0] > 30
                ):  # rewriting the file per question would be the bench's cost
                    save()
            return Embedded(np.stack([store[k] for k in keys]), None)

    saved = [time.monotonic()]

    def save():
        np.savez(path, **store)
        saved[0] = time.monotonic()

    import atexit

    atexit.register(save)
    cached = Cached()
    return lambda backend=None: cached


def product_build(
    dataset: Path, split: str, *, sample: int | None = None, analyzer: str = "simple"
) -> argparse.Namespace:
    """The arguments `prepare` takes for the product's own build of ``dataset``: hybrid, float16 vectors,
    every window, the exact path, the `simple` analyzer unless told (what `beir.py --mode hybrid` builds,
    with its store and caches)."""
    return argparse.Namespace(
        dataset=dataset,
        mode="hybrid",
        split=split,
        store="float16",
        windows="all",
        later_share=None,
        sample=sample,
        ivf=False,
        nprobe=None,
        analyzer=analyzer,
    )


def prepare(args):
    """Point Django at the variant's scratch store, build the corpus's collection there, and load the split.

    ``args`` carries dataset, mode, split, store, windows, later_share, sample, ivf and nprobe (as main's
    parser gives them). Returns (agent, collection, queries, qrels); a rebuild of an unchanged corpus
    embeds nothing, and every embedding goes through both caches (this store's file and data/embeddings/).
    """
    name = args.dataset.resolve().name
    work = ROOT / "data" / "bench"
    work.mkdir(parents=True, exist_ok=True)
    lexical_build = args.mode == "lexical"
    backend = "none" if lexical_build else os.environ.get("EMBED_BACKEND", "local")
    os.environ["EMBED_BACKEND"] = backend
    variant = "" if lexical_build else f"-{args.store}-{args.windows}"
    if args.sample is not None:
        variant += f"-sample{args.sample}"
    os.environ["DATABASE_URL"] = f"sqlite:///{work / f'{name}-{backend}{variant}.sqlite3'}"
    os.environ["INDEX_DIR"] = str(work / f"indexes-{name}-{backend}{variant}")
    folder = work / (f"{name}-docs" if args.sample is None else f"{name}-docs-sample{args.sample}")
    os.environ[f"KNOWLEDGE_BENCH__{name.upper()}_FOLDER"] = str(folder)  # the bench agent's collection
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    if args.ivf:
        os.environ["IVF_MIN_PARAGRAPHS"] = "1"
    if args.nprobe is not None:
        os.environ["IVF_NPROBE"] = str(args.nprobe)

    import django

    django.setup()
    from django.core.management import call_command

    from collections_app.index import format as index_format
    from collections_app.index import vector_codec
    from collections_app.models import Agent, Collection
    from collections_app.services.agents import create_agent, create_collection
    from collections_app.services.builds import build_collection
    from collections_app.text import windows

    if args.store == "float32":
        vector_codec.STORED_DTYPE = np.dtype("<f4")
        index_format.VECTOR_DTYPE = np.dtype("<f4")  # the IVF-ordered copy too (format.vector_file)
    if args.windows == "first":
        windows.MAX_WINDOWS = 1
    if args.later_share is not None:
        windows.LATER_WINDOW_SHARE = args.later_share
    if not lexical_build:
        # Variants differ only in how vectors are kept: each text is embedded once, across runs.
        embedding.get_embedder = cached_embedder(embedding.get_embedder(), work / f"embeddings-{backend}.npz")
    call_command("migrate", verbosity=0)
    from bench.common.embedding_cache import install

    # vectors kept under data/embeddings/: a rerun or a new scratch store embeds nothing seen before
    install()
    corpus, queries, qrels = load(args.dataset, args.split)
    if args.sample is not None:
        relevant = {doc for judged in qrels.values() for doc in judged}
        others = [doc for doc in sorted(corpus) if doc not in relevant][: args.sample]
        corpus = {doc: corpus[doc] for doc in sorted(relevant | set(others)) if doc in corpus}
    if not folder.exists() or len(list(folder.iterdir())) != len(corpus):
        folder.mkdir(exist_ok=True)
        for doc_id, (title, text) in corpus.items():
            (folder / f"{doc_id}.txt").write_text(f"{title}\n\n{text}".strip() + "\n", encoding="utf-8")
    agent = Agent.objects.filter(agent_id="bench").first() or create_agent(agent_id="bench")[0]
    collection = Collection.objects.filter(agent=agent, name=name).first() or create_collection(
        agent=agent, name=name, method="structure", size=100_000, overlap=0, built_from=f"the {name} corpus"
    )
    # The collection's analyzer (ragsite.analyzers): another than last run's only writes the keyword index
    # again (the build reuses every paragraph and vector), and the build records it.
    Collection.objects.filter(pk=collection.pk).update(analyzer=args.analyzer)
    collection.analyzer = args.analyzer
    started = time.perf_counter()
    run = build_collection(collection=collection, requested_by="bench")
    if run.status != "succeeded":
        raise SystemExit(f"build {run.status}: {run.error}")
    print(
        f"# build: {run.passages} paragraphs, {run.paragraphs_embedded} embedded, {run.documents_reused} "
        "reused, "
        f"{time.perf_counter() - started:.1f}s, model {run.model}",
        file=sys.stderr,
    )

    return agent, collection, queries, qrels


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--mode", choices=["lexical", "vector", "hybrid"], default="hybrid")
    parser.add_argument("--split", choices=["test", "train"], default="test")
    parser.add_argument(
        "--sweep", action="store_true", help="hybrid only: nDCG@10 for fusion weights 0.0-1.0"
    )
    parser.add_argument(
        "--weights",
        type=float,
        nargs="+",
        default=None,
        help="with --sweep: these weights instead of 0.0, 0.1, ... 1.0",
    )
    parser.add_argument("--weight", type=float, default=None, help="hybrid only: the cosine weight to use")
    parser.add_argument(
        "--context-weight",
        type=float,
        default=None,
        help="the lexical weight of a paragraph's title (collections_app.text.context.CONTEXT_WEIGHT)",
    )
    parser.add_argument("--limit", type=int, default=None, help="ask only the first N queries")
    parser.add_argument("--ivf", action="store_true", help="search through the IVF approximate path")
    parser.add_argument("--nprobe", type=int, default=None, help="with --ivf: IVF lists scored per search")
    parser.add_argument(
        "--store",
        choices=["float16", "float32"],
        default="float16",
        help="how vectors are stored (the store and the index); float16 is the product's",
    )
    parser.add_argument(
        "--windows",
        choices=["all", "first"],
        default="all",
        help="embed a long paragraph as all its windows (the product) or its first only",
    )
    parser.add_argument(
        "--later-share",
        type=float,
        default=None,
        help="the share of what a paragraph's best later window adds over its first that counts "
        "(collections_app.text.windows.LATER_WINDOW_SHARE; 1 is the best window, 0 the first; "
        "bench/beir/beir_sweep.py compares more pooling rules offline)",
    )
    parser.add_argument(
        "--sample",
        type=int,
        default=None,
        help="a smaller corpus: the split's relevant documents plus the first N others "
        "(for A/B comparisons that cannot afford embedding the whole corpus)",
    )
    parser.add_argument(
        "--analyzer",
        default="simple",
        help="the collection's analyzer (ragsite.analyzers: simple, english, cjk, ...)",
    )
    parser.add_argument(
        "--entry-share",
        type=float,
        default=None,
        help="with ENTRIES=1: the share of a best entry's lift that counts (ranking.ENTRY_SHARE)",
    )
    parser.add_argument(
        "--json", type=Path, help="write the figures here (default: bench/results/beir-*.json)"
    )
    args = parser.parse_args()

    agent, collection, queries, qrels = prepare(args)
    from django.conf import settings as django_settings

    from collections_app.metrics import ndcg_at_k, recall_at_k
    from collections_app.services import search as search_service
    from collections_app.services.search import approximate

    if args.entry_share is not None:
        from collections_app import ranking

        ranking.ENTRY_SHARE = args.entry_share
    if args.context_weight is not None:
        from collections_app.text import context

        context.CONTEXT_WEIGHT = args.context_weight
    items = list(queries.items())[: args.limit]
    if args.sweep:
        # Eleven passes ask the same questions: embed each once. The embedder is
        # deterministic, so this changes the time a sweep takes, not its figures.
        embedding.get_embedder = memoised(embedding.get_embedder())

    # One warm-up search loads the index (and, with --ivf, builds the IVF) outside the timing.
    started = time.perf_counter()
    search_service.search_collection(
        agent=agent,
        collection=collection,
        question=items[0][1],
        most=1,
        around=0,
        min_score=0.0,
        mode=args.mode,
    )
    warm = time.perf_counter() - started
    if args.ivf and args.mode != "lexical":
        ivf = approximate._ivf_cache[collection.pk][1]
        used = min(args.nprobe or django_settings.IVF_NPROBE or ivf.nprobe, ivf.nlist)
        print(
            f"# IVF: {ivf.nlist} lists, nprobe {used} (measured at build: {ivf.nprobe} for recall@10 "
            f"{ivf.recall:.3f}), load and build {warm:.2f}s",
            file=sys.stderr,
        )

    per_query: dict[str, float] = {}  # the last pass's nDCG@10 per query (paired comparisons of two runs)

    def evaluate(weight: float | None) -> tuple[float, float, float]:
        if weight is not None:
            fusion.FUSION_WEIGHT = weight
        ndcg = recall = 0.0
        started = time.perf_counter()
        for qid, text in items:
            answer = search_service.search_collection(
                agent=agent,
                collection=collection,
                question=text,
                most=100,
                around=0,
                min_score=0.0,
                mode=args.mode,
                max_most=100,
            )
            ranked, seen = [], set()
            for paragraph in answer["paragraphs"]:
                doc_id = paragraph["document"].removesuffix(".txt")
                if doc_id not in seen:
                    seen.add(doc_id)
                    ranked.append(doc_id)
            per_query[qid] = ndcg_at_k(ranked, qrels[qid], k=10)
            ndcg += per_query[qid]
            recall += recall_at_k(ranked, set(qrels[qid]), k=100)
        elapsed = time.perf_counter() - started
        return ndcg / len(items), recall / len(items), 1000 * elapsed / len(items)

    asked = {
        "dataset": args.dataset.resolve().name,
        "split": args.split,
        "mode": args.mode,
        "queries": len(items),
    }
    asked.update(ivf=args.ivf, sample=args.sample, limit=args.limit, store=args.store, windows=args.windows)
    asked["analyzer"] = args.analyzer
    name = f"beir-{asked['dataset']}-{args.split}-{args.mode}" + ("-ivf" if args.ivf else "")
    if args.analyzer != "simple":
        name += f"-{args.analyzer}"
    if args.sweep:
        swept = []
        for weight in args.weights or [step / 10 for step in range(11)]:
            ndcg, recall, ms = evaluate(weight)
            swept.append({"weight": weight, "ndcg@10": ndcg, "recall@100": recall})
            print(f"weight {weight:.2f}  nDCG@10 {ndcg:.4f}  recall@100 {recall:.4f}")
        print(
            "# written to",
            results.save(name + "-sweep", {**asked, "sweep": swept}, args.json),
            file=sys.stderr,
        )
        return
    ndcg, recall, ms = evaluate(args.weight)
    figures = {
        **asked,
        "fusion_weight": fusion.FUSION_WEIGHT,
        "ndcg@10": ndcg,
        "recall@100": recall,
        "ms": ms,
        "ndcg@10_per_query": per_query,
    }
    print("# written to", results.save(name, figures, args.json), file=sys.stderr)
    print(
        f"# {args.dataset.resolve().name} {args.split}, {len(items)} queries, mode {args.mode}, "
        f"analyzer {args.analyzer}, weight "
        f"{fusion.FUSION_WEIGHT}, "
        f"{ms:.1f} ms per search",
        file=sys.stderr,
    )
    print(f"nDCG@10 {ndcg:.4f}")
    print(f"recall@100 {recall:.4f}")


if __name__ == "__main__":
    main()
