"""Window pooling, fusion weight and context weight swept offline over one build's stored vectors.

    python bench/beir/beir_sweep.py ../shared/datasets/scifact --split train
    python bench/beir/beir_sweep.py ../shared/datasets/scifact --split test --only "first+0.5" --weights 0.52

`bench/beir/beir.py` asks every setting through `search_collection`, one question at a time: with
windows, each pooling rule would be a rebuild, and each weight another 809 searches. Here the
collection is built once by the same code (`beir.prepare`, so every embedding comes from the caches
of a beir.py run), and every question's parts are taken once from the build's mapped index:

* per paragraph, the cosine of its first window, the best of its other windows and their mean —
  `MappedIndex.vectors @ question`, as `MappedIndex.cosine` computes it;
* the text's seed-004 BM25 and the title's (`MappedIndex.bm25` of the index and of its context),
  each with its upper bound, as `search._lexical` reads them.

Every (pooling, fusion weight, context weight) is then scored in numpy with the product's own
functions (`fusion.hybrid_scores`, `context.lexical_with_context`, `top.top_rows`, metrics), so a
setting's figure is the one beir.py gives it; the row for the product's setting is printed first as
the check (it must equal ``beir.py --split <split>``).

Pooling rules, over a paragraph's window cosines ``c1`` (the first window) and ``r`` (the best of
the others; a one-window paragraph has none and scores ``c1`` under every rule):

* ``max``: ``max(c1, r)`` (the product before this bench), ``first``: ``c1``, ``mean``: the mean;
* ``first+A``: ``c1 + A * max(r - c1, 0)`` — a share A of what a later window adds (the product's
  rule, `windows.lean_to_first`, with A = ``windows.LATER_WINDOW_SHARE``);
* ``first-D``: ``max(c1, r - D)`` — a later window must beat the first by D to count;
* ``log-G``: ``max(c1, r) - G * log2(windows)`` — a discount growing with the paragraph's length.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.beir import beir  # noqa: E402

DEFAULT_RULES = (
    "max",
    "first",
    "mean",
    "first-0.01",
    "first-0.02",
    "first-0.03",
    "first-0.05",
    "first-0.08",
    "first+0.25",
    "first+0.5",
    "first+0.75",
    "log-0.01",
    "log-0.02",
    "log-0.04",
)
DEFAULT_WEIGHTS = tuple(round(0.40 + 0.02 * step, 2) for step in range(16))  # 0.40 ... 0.70
DEFAULT_CONTEXT = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)


def pooled(
    rule: str, first: np.ndarray, rest: np.ndarray, mean: np.ndarray, windows: np.ndarray
) -> np.ndarray:
    """One cosine per paragraph from its window cosines, by ``rule`` (module docstring); float32 as stored."""
    several = windows > 1
    best = np.where(several, np.maximum(first, rest), first)
    if rule == "max":
        return best
    if rule == "first":
        return first
    if rule == "mean":
        return mean
    for prefix in ("first-", "first+", "log-"):
        if rule.startswith(prefix):
            try:
                amount = np.float32(rule[len(prefix) :])
            except ValueError:
                break
            if prefix == "first-":
                return np.where(several, np.maximum(first, rest - amount), first).astype(np.float32)
            if prefix == "first+":
                return np.where(several, first + amount * np.maximum(rest - first, 0), first).astype(
                    np.float32
                )
            return (best - amount * np.log2(windows).astype(np.float32)).astype(np.float32)
    raise SystemExit(f"unknown pooling rule {rule!r}")


def question_parts(index, embedder, questions: list[str]):
    """Per question: first-window cosine, best later window, mean, text BM25 and bound, title BM25 and
    bound."""
    from ragsite.lexical import terms

    vector_row = np.asarray(index.vector_row)
    starts = np.flatnonzero(np.diff(vector_row, prepend=-1))
    if starts.size != index.size:
        raise SystemExit("every paragraph needs a vector for this sweep")
    windows = np.diff(np.append(starts, vector_row.size))
    several = windows > 1
    # [second window, next paragraph's first) of each paragraph with more than one window, as reduceat bounds.
    bounds = np.stack([starts[several] + 1, starts[several] + windows[several]], 1).ravel()
    vectors = embedder.embed_with_usage(questions).vectors
    parts = []
    for question, vector in zip(questions, vectors, strict=True):
        per_vector = index.vectors @ np.asarray(vector, dtype=np.float32)
        first = per_vector[starts]
        rest = np.full(index.size, -np.inf, dtype=np.float32)
        if bounds.size:
            # The appended value only keeps the last bound inside the array; [::2] drops the gaps between.
            rest[several] = np.maximum.reduceat(np.append(per_vector, np.float32(-np.inf)), bounds)[::2]
        mean = (np.add.reduceat(per_vector, starts) / windows).astype(np.float32)
        text, text_bound = index.bm25(terms(question))
        context, context_bound = (
            index.context.bm25(terms(question)) if index.context is not None else (None, 0.0)
        )
        parts.append((first, rest, mean, text, text_bound, context, context_bound))
    return parts, windows


def score_all(parts, windows, documents, qrels_list, rule, weight, context_weight, shift=0.0):
    """nDCG@10 and recall@100 over the questions for one setting, with the product's fusion and ranking.

    ``shift`` s > 0 maps the cosine onto [0, 1] by ``(cos - s) / (1 - s)`` before the product's clip
    (the cosine-normalisation lever: still absolute, but a cosine below s counts as none).
    """
    from collections_app.metrics import ndcg_at_k, recall_at_k
    from collections_app.text.context import lexical_with_context
    from ragsite.fusion import hybrid_scores
    from ragsite.top import top_rows

    ndcg = recall = 0.0
    for (first, rest, mean, text, text_bound, context, context_bound), qrels in zip(
        parts, qrels_list, strict=True
    ):
        cosine = pooled(rule, first, rest, mean, windows)
        if shift:
            cosine = (cosine - np.float32(shift)) / np.float32(1 - shift)
        lexical, bound = lexical_with_context(text, text_bound, context, context_bound, weight=context_weight)
        scores, _mode = hybrid_scores(cosine, lexical, bound, weight=weight)
        ranked = [documents[row] for row in top_rows(scores, None, 100)]
        ndcg += ndcg_at_k(ranked, qrels, k=10)
        recall += recall_at_k(ranked, set(qrels), k=100)
    return ndcg / len(parts), recall / len(parts)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--split", choices=["test", "train"], default="train")
    parser.add_argument(
        "--rules", nargs="+", default=list(DEFAULT_RULES), help="pooling rules (module docstring)"
    )
    parser.add_argument(
        "--weights", type=float, nargs="+", default=list(DEFAULT_WEIGHTS), help="fusion weights"
    )
    parser.add_argument("--context-weights", type=float, nargs="+", default=list(DEFAULT_CONTEXT))
    parser.add_argument(
        "--cosine-shifts",
        type=float,
        nargs="+",
        default=[0.0],
        help="cosine s mapped to 0 before the clip, (cos - s) / (1 - s); 0 is the product's",
    )
    parser.add_argument("--sample", type=int, default=None, help="as beir.py --sample")
    parser.add_argument("--analyzer", default="simple", help="as beir.py --analyzer")
    args = parser.parse_args()
    for weight in [*args.weights, *args.context_weights]:
        if not 0.0 <= weight <= 1.0:
            parser.error(f"weights must be within [0, 1], got {weight}")
    if any(not 0.0 <= shift < 1.0 for shift in args.cosine_shifts):
        parser.error("cosine shifts must be within [0, 1)")

    # The product's build: float16 vectors, every window, the store and caches of `beir.py --mode hybrid`.
    agent, collection, queries, qrels = beir.prepare(
        beir.product_build(args.dataset, args.split, sample=args.sample, analyzer=args.analyzer)
    )
    from collections_app.models import Document
    from collections_app.services import search as search_service
    from collections_app.services.search.rows import current_build
    from collections_app.text import context as context_module
    from collections_app.text import windows as windows_module
    from ragsite import embedding, fusion

    index = search_service.collection_index(collection, current_build(collection))
    names = dict(Document.objects.filter(collection=collection).values_list("pk", "name"))
    documents = [names[int(pk)].removesuffix(".txt") for pk in np.asarray(index.row_document)]
    items = list(queries.items())
    started = time.perf_counter()
    parts, windows = question_parts(index, embedding.get_embedder(), [text for _qid, text in items])
    qrels_list = [qrels[qid] for qid, _text in items]
    print(
        f"# {len(items)} {args.split} questions, {index.size} paragraphs, {int(windows.sum())} windows "
        f"({int((windows > 1).sum())} paragraphs with more than one); parts in "
        f"{time.perf_counter() - started:.0f}s",
        file=sys.stderr,
    )

    product = (
        f"first+{windows_module.LATER_WINDOW_SHARE:g}",
        fusion.FUSION_WEIGHT,
        context_module.CONTEXT_WEIGHT,
    )
    product = (*product, 0.0)
    settings_list = [product] + [
        (rule, weight, cw, shift)
        for shift in args.cosine_shifts
        for rule in args.rules
        for weight in args.weights
        for cw in args.context_weights
        if (rule, weight, cw, shift) != product
    ]
    print("| pooling | fusion weight | context weight | cosine shift | nDCG@10 | recall@100 |")
    print("|---|---|---|---|---|---|")
    results = []
    for rule, weight, context_weight, shift in settings_list:
        ndcg, recall = score_all(parts, windows, documents, qrels_list, rule, weight, context_weight, shift)
        results.append((ndcg, recall, rule, weight, context_weight, shift))
        print(
            f"| {rule} | {weight:.2f} | {context_weight:.2f} | {shift:.2f} | {ndcg:.4f} | {recall:.4f} |",
            flush=True,
        )
    best = max(results, key=lambda r: (r[0], r[1]))
    print(
        f"# best on {args.split}: pooling {best[2]}, weight {best[3]:.2f}, context {best[4]:.2f}, "
        f"shift {best[5]:.2f}: nDCG@10 {best[0]:.4f} recall@100 {best[1]:.4f}",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
