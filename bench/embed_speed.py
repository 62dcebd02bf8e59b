"""Embedding speed of the local numpy embedder, against sentence-transformers on torch when present.

    python bench/embed_speed.py [CORPUS] [-n 256] [--batch-size 64] [--batch-tokens 2048]
                                [--threads N [N ...]] [--chunk 64] [--repeat 3]

CORPUS is a BEIR corpus.jsonl(.gz); the default is the SciFact copy in ../shared/datasets beside the
repository. Each abstract ("text") is one paragraph. Prints paragraphs per second for a bulk embed,
the median latency of embedding one question (20 questions, one at a time), and, when
`sentence_transformers` can be imported (never in the project's own environment: run this file with
another interpreter that has torch, with the repository on PYTHONPATH), the same figures for it on
the same texts in the same process, the ratios, and how closely the two agree (cosine). The two
take turns, 64 paragraphs (and one question) at a time, so that other work on a shared machine
weighs on both alike; each round's ratio is printed, and the best round of each is summarised.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from ragsite.embedders import LocalEmbedder, default_model_dir  # noqa: E402

DEFAULT_CORPUS = REPO.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl.gz"


def read_paragraphs(path: Path, limit: int) -> list[str]:
    """The first `limit` non-empty "text" fields of a BEIR corpus file."""
    opener = gzip.open if path.suffix == ".gz" else open
    paragraphs: list[str] = []
    with opener(path, "rt", encoding="utf-8") as lines:
        for line in lines:
            text = json.loads(line).get("text", "").strip()
            if text:
                paragraphs.append(text)
            if len(paragraphs) >= limit:
                break
    return paragraphs


def read_questions(corpus: Path, paragraphs: list[str], count: int) -> list[str]:
    """Questions from queries.jsonl beside the corpus, else the paragraphs' first sentences."""
    queries = corpus.parent / "queries.jsonl"
    questions: list[str] = []
    if queries.is_file():
        with queries.open(encoding="utf-8") as lines:
            questions = [json.loads(line)["text"] for _, line in zip(range(count), lines, strict=False)]
    if len(questions) < count:
        questions += [p.split(". ")[0] for p in paragraphs[: count - len(questions)]]
    return questions


def timed(function, *args) -> tuple[float, object]:
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result


def load_sentence_transformers(batch_size: int):
    """An `encode(texts)` for sentence-transformers on torch, or None when it cannot be imported."""
    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError:
        return None, ""
    model = SentenceTransformer(str(default_model_dir()), device="cpu")

    def encode(texts: list[str]) -> np.ndarray:
        return model.encode(texts, batch_size=batch_size, normalize_embeddings=True)

    return encode, f"torch {torch.__version__}, {torch.get_num_threads()} threads, batch_size={batch_size}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("-n", type=int, default=256, help="paragraphs to embed (default 256)")
    parser.add_argument("--batch-size", type=int, default=64, help="local: most texts per batch")
    parser.add_argument("--batch-tokens", type=int, default=2048, help="local: most tokens per batch")
    parser.add_argument(
        "--threads",
        type=int,
        nargs="+",
        default=[None],
        help="local: worker threads (default: CPUs); several values compare them in one run",
    )
    parser.add_argument("--st-batch-size", type=int, default=32, help="sentence-transformers batch size")
    parser.add_argument("--chunk", type=int, default=64, help="paragraphs per turn (default 64)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="rounds over all paragraphs and questions; the best round of each embedder is reported",
    )
    args = parser.parse_args()

    paragraphs = read_paragraphs(args.corpus, args.n)
    questions = read_questions(args.corpus, paragraphs, 20)
    locals_ = {
        (
            "local numpy"
            if threads is None or len(args.threads) == 1
            else f"local numpy, {threads} thread(s)"
        ): LocalEmbedder(batch_size=args.batch_size, batch_tokens=args.batch_tokens, threads=threads)
        for threads in args.threads
    }
    embedder = next(iter(locals_.values()))
    candidates = {name: local.embed for name, local in locals_.items()}
    theirs, described = load_sentence_transformers(args.st_batch_size)
    if theirs is not None:
        candidates["sentence-transformers"] = theirs
    tokens = [min(embedder.count_tokens(p), embedder.window) for p in paragraphs]
    print(
        f"corpus: {args.corpus.name}, {len(paragraphs)} paragraphs, {sum(tokens) / len(tokens):.0f} tokens "
        "each "
        f"on average after truncation to {embedder.window}; {os.cpu_count()} CPUs"
    )
    for name, local in locals_.items():
        print(
            f"{name}: threads={local._threads} batch_size={args.batch_size} batch_tokens={args.batch_tokens}"
        )
    if theirs is None:
        print("sentence-transformers is not importable here: no comparison")
    else:
        print(f"sentence-transformers: {described}")

    for encode in candidates.values():
        encode(paragraphs[:8])  # load models and warm caches outside the clock
    # The embedders take turns chunk by chunk (and question by question), alternating who goes first,
    # so that other work on a shared machine falls on both alike; the best round of each is reported.
    chunks = [paragraphs[i : i + args.chunk] for i in range(0, len(paragraphs), args.chunk)]
    names = list(candidates)
    bulk = {name: float("inf") for name in names}
    latency = {name: float("inf") for name in names}
    vectors: dict[str, list[np.ndarray]] = {}
    for _ in range(args.repeat):
        spent = dict.fromkeys(names, 0.0)
        vectors = {name: [] for name in names}
        for turn, chunk in enumerate(chunks):
            for name in names[turn % 2 :] + names[: turn % 2]:
                seconds, result = timed(candidates[name], chunk)
                spent[name] += seconds
                vectors[name].append(np.asarray(result))
        waits: dict[str, list[float]] = {name: [] for name in names}
        for turn, question in enumerate(questions):
            for name in names[turn % 2 :] + names[: turn % 2]:
                waits[name].append(timed(candidates[name], [question])[0])
        for name in names:
            bulk[name] = min(bulk[name], spent[name])
            latency[name] = min(latency[name], statistics.median(waits[name]))
        print(
            "round: "
            + ", ".join(f"{name} {len(paragraphs) / spent[name]:.1f}/s" for name in names)
            + (f", ratio {spent[names[1]] / spent[names[0]]:.2f}" if len(names) == 2 else ""),
            flush=True,
        )
    best_latency = latency
    vectors = {name: np.vstack(parts) for name, parts in vectors.items()}

    rates = {name: len(paragraphs) / seconds for name, seconds in bulk.items()}
    for name in candidates:
        print(
            f"{name:24s}{rates[name]:7.1f} paragraphs/s   question latency {best_latency[name] * 1000:6.1f} "
            "ms "
            f"(median of {len(questions)})"
        )
    if theirs is not None:
        other = "sentence-transformers"
        for ours in locals_:
            print(
                f"{'ratio ' + ours + ' / st':24s}{rates[ours] / rates[other]:7.2f}x throughput   "
                f"{best_latency[other] / best_latency[ours]:.2f}x latency (above 1: local is faster)"
            )
            agreement = np.sum(np.asarray(vectors[ours]) * np.asarray(vectors[other]), axis=1)
            print(f"agreement: min cosine {agreement.min():.6f} over {len(paragraphs)} paragraphs")


if __name__ == "__main__":
    main()
