"""Answer size and quality at each answer budget (max_chars), with the budget's fill order before and now.

    python bench/answer_budget.py                       # the dev set: found@5
    python bench/answer_budget.py --scifact train       # SciFact through bench/beir.py's store: nDCG@10
    python bench/answer_budget.py --scifact test
    python bench/answer_budget.py --scifact test --mode lexical   # no embedding: a quick build

**Dev set**: its corpus (bench/known_answers) built with the defaults (structure, AROUND); each question
asked at the default floor, most=5, at each budget (100,000 never binds: the answers as before the
budget). Reported: found@5 (the marker in one of the returned paragraphs), the answer's size in words
(all its paragraphs), median and 95th percentile, and how many answers were cut; for each fill order:
*hits* (every hit before any neighbour, `text.budget.fit` now) and *best hit* (each run's best hit
first, the others of a run merged by `stitch` placed as neighbours: the order before session 8).
Also where each marker sits in the unbudgeted answer: a run's best hit, another hit, a neighbour.

**SciFact**: bench/beir.py's collection (one paragraph a document, built with the configured
embedder), each query of the split asked hybrid, unfloored, most=10, around AROUND, at each budget;
nDCG@10 over the documents the answer holds, in order. Train is for choosing, test for the report.
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness  # noqa: E402

BUDGETS = (100_000, 12_000, 10_000, 8_000, 6_000, 4_000)


def fill_order(order: str) -> None:
    """Point the search at `fit` with every hit (``hits``) or with each run's best hit only (``best``)."""
    module = importlib.import_module("collections_app.services.search.stitched")
    from collections_app.text.budget import fit

    def best_hit_first(runs, readable, max_chars, hits=None, question_terms=None):
        return fit(runs, readable, max_chars, None, question_terms)

    module.fit = fit if order == "hits" else best_hit_first


def table(metric: str, items: list, ask, score) -> None:
    """One row per budget and fill order: ``ask(item, budget)`` gives the answer, ``score(item, answer)``
    its quality; the mean quality, the answers' words (median, p95) and how many were cut."""
    print(f"| max_chars, fill order | {metric} | words: median | words: p95 | answers cut |")
    print("|---|---|---|---|---|")
    for budget in BUDGETS:
        for order in ("best", "hits") if budget < 100_000 else ("hits",):
            fill_order(order)
            total, sizes, cut = 0.0, [], 0
            for item in items:
                answer = ask(item, budget)
                total += score(item, answer)
                sizes.append(sum(len(p["text"].split()) for p in answer["paragraphs"]))
                cut += answer["cut"]
            label = f"{budget:,}" + ("" if budget == 100_000 else f", {order}")
            p95 = statistics.quantiles(sizes, n=20)[-1]
            print(
                f"| {label} | {total / len(items):.3f} | {statistics.median(sizes):,.0f} | {p95:,.0f} "
                f"| {cut} of {len(items)} |"
            )
    fill_order("hits")


def where_markers(agent, collection, questions) -> Counter:
    """Where each marker sits in the unbudgeted answer (by the rows `stitched` returned)."""
    module = importlib.import_module("collections_app.services.search.stitched")
    search = importlib.import_module("collections_app.services.search")
    seen: dict = {}
    real = module.stitched

    def spy(index, mask, hits, around, max_chars=None, **kwargs):
        out = real(index, mask, hits, around, max_chars, **kwargs)
        seen.update(hits=[row for row, _ in hits], runs=out.runs, readable=out.readable)
        return out

    search.stitched = spy
    kinds: Counter = Counter()
    ranks = ("best hit of its run", "another hit of a run", "a neighbour")
    try:
        for item in questions:
            search.search_collection(
                agent=agent, collection=collection, question=item["question"], most=5, max_chars=100_000
            )
            wanted, best = harness.normalise(item["answer"]), {run.hit for run in seen["runs"]}
            places = [
                ranks[0] if ordinal in best else ranks[1] if ordinal in seen["hits"] else ranks[2]
                for ordinal, row in seen["readable"].items()
                if wanted in harness.normalise(row.text)
            ]
            kinds[min(places, key=ranks.index) if places else "no single row (or not found)"] += 1
    finally:
        search.stitched = real
    return kinds


def dev_set() -> None:
    harness.setup("ocr")
    from collections_app.services.search import search_collection

    questions, _controls = harness.load_items()
    agent, collection = harness.built_collection("ocr-0", harness.KNOWN_ANSWERS / "corpus")
    print(f"# dev set: {len(questions)} questions, most 5, default floor and around")
    table(
        "found@5",
        questions,
        lambda item, budget: search_collection(
            agent=agent, collection=collection, question=item["question"], most=5, max_chars=budget
        ),
        lambda item, answer: bool(harness.found_rank(answer["paragraphs"], item["answer"])),
    )
    where = where_markers(agent, collection, questions)
    print("\nWhere the marker sits in the unbudgeted answer:", dict(where))


def structured(collection):
    """The same documents as ``collection`` in a collection of the product's chunking (structure at its
    default size and overlap), so abstracts longer than a paragraph have neighbours."""
    from collections_app.conf import folder_variable
    from collections_app.models import Collection
    from collections_app.services.agents import create_collection
    from collections_app.services.builds import build_collection

    name = f"{collection.name}-structure"
    os.environ[folder_variable(name, "bench")] = os.environ[folder_variable(collection.name, "bench")]
    made = Collection.objects.filter(agent=collection.agent, name=name).first() or create_collection(
        agent=collection.agent, name=name, method="structure", built_from="SciFact, default chunking"
    )
    run = build_collection(collection=made, requested_by="bench")
    print(f"# {name}: {run.passages} paragraphs", file=sys.stderr)
    return made


def scifact(split: str, limit: int | None, mode: str, default_chunking: bool) -> None:
    from bench import beir

    args = argparse.Namespace(
        dataset=harness.SCIFACT,
        mode=mode,
        split=split,
        store="float16",
        windows="all",
        later_share=None,
        sample=None,
        ivf=False,
        nprobe=None,
    )
    agent, collection, queries, qrels = beir.prepare(args)
    if default_chunking:
        collection = structured(collection)
    from collections_app.metrics import ndcg_at_k
    from collections_app.services.search import search_collection

    items = list(queries.items())[:limit]
    print(
        f"# SciFact {split}: {len(items)} queries, {mode}, unfloored, most 10, default around, "
        f"{'structure at its default size' if default_chunking else 'one paragraph a document'}"
    )

    def ask(item, budget):
        return search_collection(
            agent=agent,
            collection=collection,
            question=item[1],
            most=10,
            min_score=0.0,
            max_chars=budget,
            mode=mode,
        )

    def score(item, answer):
        ranked = dict.fromkeys(p["document"].removesuffix(".txt") for p in answer["paragraphs"])
        return ndcg_at_k(list(ranked), qrels[item[0]], k=10)

    table("nDCG@10", items, ask, score)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scifact", choices=["train", "test"], default=None)
    parser.add_argument("--limit", type=int, default=None, help="SciFact: ask only the first N queries")
    parser.add_argument(
        "--mode",
        choices=["hybrid", "lexical"],
        default="hybrid",
        help="SciFact: lexical builds without embedding (quick)",
    )
    parser.add_argument(
        "--default-chunking",
        action="store_true",
        help="SciFact: structure at its default size, not one paragraph a document",
    )
    args = parser.parse_args()
    if args.scifact:
        scifact(args.scifact, args.limit, args.mode, args.default_chunking)
    else:
        dev_set()


if __name__ == "__main__":
    main()
