"""The parent strategy against structure (issue 28): found@1/@5 on the dev set, nDCG@10 on SciFact.

    python bench/parent.py dev                         # the known-answers dev set, hybrid
    python bench/parent.py scifact --split train       # SciFact, whole corpus (lexical unless --hybrid)
    python bench/parent.py scifact --split test --hybrid --sample 300
    python bench/parent.py dev --corpus data/bench/man-shelf --questions bench/man_shelf/questions.jsonl

Every variant is built in memory exactly as `measure` builds one (`collections_app.measure.scratch_index`:
the build's chunking, contexts, windows and float16 vectors) and asked through the search's own ranking
and stitching (`measure.rank`: fuse, floor, top k, stitch, sections for parent), then fitted to the
answer budget as search fits it (`text.budget.fit`, ANSWER_MAX_CHARS). A question is found at k when its
marker is in one of the first k paragraphs; found at 1 when the answer asked for one paragraph holds it
(issue 28, item 4). Answer size is the words of the whole answer (5 paragraphs), median and p95. Build is
the time to chunk and index the corpus (vectors come from bench/embedding_cache, so it excludes
embedding); storage is paragraphs, their text and their stored vectors (float16 windows).

SciFact: each abstract ("title", blank line, text) is one document; a document's rank is that of its
first paragraph among 100 asked for, unfloored, with sections (around 1) for parent.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness  # noqa: E402

BUDGET = 6000  # ANSWER_MAX_CHARS's default
DEFAULT_SECTION_CHARS = 3000  # collections_app.text.stitch.SECTION_CHARS, read before any variant sets it


def p95(values: list[int]) -> int:
    return int(np.percentile(values, 95)) if values else 0


def storage(index) -> tuple[int, int]:
    """(paragraphs, bytes of text and float16 vectors)."""
    text = sum(len(row.text.encode()) for row in index.rows)
    vectors = 0 if index.matrix is None else index.matrix.shape[0] * index.matrix.shape[1] * 2
    return len(index.rows), text + vectors


def variants(spec: list[str]):
    """``method:size[:section chars]`` → (Variant, section bound)."""
    from collections_app import measure as m
    from collections_app.text.chunking import resolve_sizes

    out = []
    for item in spec:
        method, size, *bound = item.split(":")
        resolved, overlap = resolve_sizes(method, int(size) if size else None)
        out.append((m.Variant(method, resolved, overlap, 1), int(bound[0]) if bound else None))
    return out


def scratch(documents, variant, cache, names):
    """`measure.scratch_index` with the configured embedder counting tokens, as the measure service
    passes it: a paragraph longer than the model's window is embedded as its windows and pooled as
    search pools them. (Before Session 10 the benches left the counter out, so a long paragraph was
    read by its first 256 tokens alone; docs/benchmarks.md, Session 10.)"""
    from collections_app import measure as m
    from ragsite import embedding

    tokens = embedding.get_embedder() if cache.embed is not None else None
    return m.scratch_index(documents, variant, cache=cache, tokens=tokens, names=names)


def ask(index, question, vector, variant, bound, *, most, floor):
    from collections_app import measure as m
    from collections_app.text import stitch
    from collections_app.text.budget import fit
    from collections_app.text.chunking import returns_sections
    from ragsite.fusion import FUSION_WEIGHT

    stitch.SECTION_CHARS = bound if bound is not None else DEFAULT_SECTION_CHARS
    runs = m.rank(
        index,
        question,
        vector,
        weight=FUSION_WEIGHT,
        most=most,
        around=variant.around,
        floor=floor,
        sections=returns_sections(variant.method),
    )
    return fit(runs, index.readable, BUDGET).runs


def dev_set(args, cache):
    """The dev set (or ``--corpus``/``--questions``): its folder, documents and their names, questions,
    controls, and the vectors of the questions then the controls (None when lexical)."""
    from collections_app import measure as m

    folder = args.corpus or harness.KNOWN_ANSWERS / "corpus"
    paths = sorted(folder.glob("*.md"))
    documents, names = [p.read_text(encoding="utf-8") for p in paths], [p.name for p in paths]
    items, controls = harness.load_items(args.questions or harness.KNOWN_ANSWERS / "questions.jsonl")
    questions = [m.Question(i["question"], i["answer"]) for i in items]
    asked = cache.vectors([q.text for q in questions] + controls)
    return folder, documents, names, questions, controls, asked


def dev(args, cache) -> None:
    from collections_app import measure as m

    folder, documents, names, questions, controls, asked = dev_set(args, cache)
    print(
        f"# {folder.name}: {len(questions)} questions, {len(controls)} controls, {len(documents)} documents"
    )
    print(
        "| variant | floor | found@1 | found@5 | controls empty | answer words median / p95 | "
        "paragraphs | storage KB | build s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for variant, bound in variants(args.variants):
        started = time.perf_counter()
        index = scratch(documents, variant, cache, names)
        built = time.perf_counter() - started
        count, size = storage(index)
        for floor in args.floors:
            at1 = at5 = 0
            words = []
            for number, question in enumerate(questions):
                vector = asked[number] if asked is not None else None
                runs = ask(index, question.text, vector, variant, bound, most=5, floor=floor)
                words.append(sum(len(run.text.split()) for run in runs))
                found = m.find_answer(runs, question.answer)
                at5 += found["found"]
                # Asked again for one paragraph: with the budget, one answer may hold more of its section
                # than the first of five does.
                alone = ask(index, question.text, vector, variant, bound, most=1, floor=floor)
                at1 += m.find_answer(alone, question.answer)["found"]
            empty = sum(
                not ask(
                    index,
                    text,
                    asked[len(questions) + n] if asked is not None else None,
                    variant,
                    bound,
                    most=1,
                    floor=floor,
                )
                for n, text in enumerate(controls)
            )
            name = f"{variant.method} {variant.size}/{variant.overlap}" + (f" §{bound}" if bound else "")
            print(
                f"| {name} | {floor} | {at1}/{len(questions)} | {at5}/{len(questions)} | "
                f"{empty}/{len(controls)} | {statistics.median(words):.0f} / {p95(words)} | {count} | "
                f"{size // 1024} | {built:.1f} |",
                flush=True,
            )


def scifact_set(args) -> tuple[list[str], list[str], list[tuple[str, str]], dict]:
    """SciFact's ``args.split`` as documents (title and text, an abstract a document, in id order), their
    ids, the judged (query id, question) pairs and the judgements; with ``args.sample`` only the judged
    abstracts and that many others."""
    from bench.beir import load

    corpus, queries, qrels = load(args.dataset, args.split)
    if args.sample is not None:
        relevant = {doc for judged in qrels.values() for doc in judged}
        others = [doc for doc in sorted(corpus) if doc not in relevant][: args.sample]
        corpus = {doc: corpus[doc] for doc in sorted(relevant | set(others)) if doc in corpus}
    ids = sorted(corpus)
    documents = [f"{corpus[d][0]}\n\n{corpus[d][1]}".strip() + "\n" for d in ids]
    return ids, documents, [(qid, queries[qid]) for qid in qrels if qid in queries], qrels


def scifact(args, cache) -> None:
    from collections_app import measure as m
    from collections_app.metrics import ndcg_at_k, recall_at_k

    ids, documents, items, qrels = scifact_set(args)
    items = items[: args.limit]
    asked = cache.vectors([text for _qid, text in items])
    print(
        f"# SciFact {args.split}: {len(items)} queries, {len(documents)} documents, "
        f"{'hybrid' if asked is not None else 'lexical'}"
    )
    print("| variant | nDCG@10 | recall@100 | paragraphs | storage KB | build s |")
    print("|---|---|---|---|---|---|")
    for variant, _bound in variants(args.variants):  # a document's rank does not depend on the bound
        started = time.perf_counter()
        index = scratch(documents, variant, cache, [f"{d}.txt" for d in ids])
        built = time.perf_counter() - started
        count, size = storage(index)
        ndcg = recall = 0.0
        for number, (qid, text) in enumerate(items):
            vector = asked[number] if asked is not None else None
            runs = m.rank(index, text, vector, weight=_weight(), most=100, around=0, floor=0.0)
            ranked = list(dict.fromkeys(ids[run.document] for run in runs))
            ndcg += ndcg_at_k(ranked, qrels[qid], k=10)
            recall += recall_at_k(ranked, set(qrels[qid]), k=100)
        name = f"{variant.method} {variant.size}/{variant.overlap}"
        print(
            f"| {name} | {ndcg / len(items):.4f} | {recall / len(items):.4f} | {count} | {size // 1024} | "
            f"{built:.1f} |",
            flush=True,
        )


def _weight() -> float:
    from ragsite.fusion import FUSION_WEIGHT

    return FUSION_WEIGHT


def set_options(parser: argparse.ArgumentParser, *, split: str = "train") -> None:
    """The options naming what is asked: another dev shelf, or SciFact's split, sampled, embedded or not."""
    parser.add_argument("--dataset", type=Path, default=harness.SCIFACT)
    parser.add_argument("--corpus", type=Path, help="dev: another folder of Markdown (the man-page shelf)")
    parser.add_argument("--questions", type=Path, help="dev: its questions (jsonl, as the dev set's)")
    parser.add_argument("--split", choices=["train", "test"], default=split)
    parser.add_argument("--hybrid", action="store_true", help="SciFact: embed (the dev set always does)")
    parser.add_argument("--sample", type=int, default=None, help="SciFact: relevant documents and N others")


def vector_cache(args, name: str):
    """Django set up for a bench called ``name`` and the cache every variant's vectors come from: none
    for SciFact asked lexically (no model is loaded), the local model otherwise."""
    lexical = args.set == "scifact" and not args.hybrid
    harness.setup(name, backend="none" if lexical else None)
    from collections_app import measure as m
    from ragsite import embedding

    return m.VectorCache(None if lexical else embedding.get_embedder().embed)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("set", choices=["dev", "scifact"])
    parser.add_argument(
        "--variants",
        nargs="+",
        default=["structure:", "parent:"],
        help="method:size[:section chars]; an empty size is the method's default",
    )
    parser.add_argument("--floors", type=float, nargs="+", default=[0.22, 0.0])
    set_options(parser, split="test")
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    cache = vector_cache(args, "parent")
    started = time.perf_counter()
    (dev if args.set == "dev" else scifact)(args, cache)
    print(f"# {time.perf_counter() - started:.0f}s, {cache.embedded} texts embedded", file=sys.stderr)


if __name__ == "__main__":
    main()
