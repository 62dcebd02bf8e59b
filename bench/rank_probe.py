"""Where the dev set's rank-1 misses come from, and ranking-side variants scored from cached parts
(issue 28, Session 9).

    python bench/rank_probe.py diagnose           # the misses at 1: ranks, components, what beat them
    python bench/rank_probe.py sweep [--grid]     # ranking variants on the dev set (hybrid)
    python bench/rank_probe.py sweep --knobs k1=0.9,phrase=0.2 context=0.5   # named variants
    python bench/rank_probe.py sweep --corpus data/bench/man-shelf --questions bench/man_shelf/questions.jsonl
    python bench/rank_probe.py scifact --split train [--hybrid --sample 200]

Structure at today's defaults (1,800/180, around 1) is built once as `measure` builds it
(`measure.scratch_index`); each question's parts are computed once: the text's BM25 and its bound, the
context's BM25 and its bound, and the pooled cosine (vectors from bench/embedding_cache, so no variant
embeds again). A variant (`Knobs`, one field a setting) re-scores those parts (for k1/b it rebuilds the
BM25 indexes over the same texts), then answers exactly as search does: `ranking.top_at_floor` at the
floor, `stitch` with around 1, `budget.fit` to the answer budget. ``base`` is the product's fusion
(`fusion.hybrid_scores` over `lexical_with_context`) and reproduces `bench/parent.py`'s structure row.
found@1 is the answer asked for one paragraph; the sweep's last column lists the questions a variant
wins (+) or loses (-) at 1 against ``base``. A variant on another scale than the fused score
(``floor_base``) is floored on the product's score and only orders what clears it, as the reranker does.
SciFact ranks a document where its best paragraph ranks, unfloored.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.parent import dev_set, p95, scifact_set, scratch, set_options, variants, vector_cache  # noqa: E402
from bench.rank_knobs import STOP, Knobs, Parts, contexts_of, evaluate, lexical01, scores  # noqa: E402


def setup_dev(args, cache):

    folder, documents, names, questions, controls, asked = dev_set(args, cache)
    ((structure, _),) = variants(["structure:"])
    index = scratch(documents, structure, cache, names)
    parts = Parts(index, contexts_of(documents, names, structure))
    parts.cache = cache
    return parts, names, questions, controls, asked


def diagnose(args, cache) -> None:
    from collections_app.measure import normalise
    from ragsite.lexical import terms

    parts, names, questions, controls, asked = setup_dev(args, cache)
    knobs = Knobs()
    at1, at5, empty, _w, hits1 = evaluate(parts, questions, controls, asked, knobs)
    print(f"# base: found@1 {at1}, found@5 {at5}, controls empty {empty}")
    text_bm25, _ctx = parts.bm25(1.2, 0.75)
    for number, question in enumerate(questions):
        if hits1[number]:
            continue
        vector = asked[number]
        marker = normalise(question.answer)
        holding = [r.ordinal for r in parts.rows if marker in normalise(r.text)]
        split = not holding
        if split:  # the marker runs over a seam: the rows whose pair holds it
            holding = [
                r.ordinal
                for r in parts.rows[:-1]
                if marker in normalise(r.text + " " + parts.rows[r.ordinal + 1].text)
            ]
        fused = scores(parts, question.text, vector, knobs)
        lex = lexical01(parts, question.text, knobs)
        cos = np.clip(parts.index.row_cosines(vector), 0, 1)

        def rank_of(arr, rows):
            order = np.argsort(-arr, kind="stable")
            where = {int(r): i + 1 for i, r in enumerate(order)}
            return min(where[r] for r in rows) if rows else None

        best = min(holding, key=lambda r: -fused[r]) if holding else None
        top = int(np.argmax(fused))
        q_terms = [w for w in terms(question.text) if w not in STOP]
        known = [w for w in q_terms if w in text_bm25.term_ids]
        in_row = [w for w in q_terms if best is not None and w in set(parts.row_terms[best])]
        same = best is not None and parts.rows[top].document == parts.rows[best].document
        print(
            f"\n## Q{number + 1}: {question.text}\n   marker rows {holding} {'(split)' if split else ''}; "
            f"rank hybrid {rank_of(fused, holding)} lexical {rank_of(lex, holding)} "
            f"vector {rank_of(cos, holding)}"
        )
        if best is not None:
            print(
                f"   right: {names[parts.rows[best].document]} [{parts.contexts[best][:80]}] "
                f"fused {fused[best]:.3f} lex {lex[best]:.3f} cos {cos[best]:.3f}"
            )
        print(
            f"   top:   {names[parts.rows[top].document]} [{parts.contexts[top][:80]}] "
            f"fused {fused[top]:.3f} lex {lex[top]:.3f} cos {cos[top]:.3f} "
            f"{'same document' if same else 'OTHER DOCUMENT'}; rows apart "
            f"{abs(top - best) if best is not None else '-'}"
        )
        print(
            f"   question content terms {len(q_terms)}, in the corpus {len(known)}, in the right row "
            f"{len(in_row)}: missing {sorted(set(q_terms) - set(in_row))}"
        )


def sweep_knobs() -> list[Knobs]:
    out = [Knobs()]
    out += [
        Knobs(f"k1 {k1} b {b}", k1=k1, b=b)
        for k1 in (0.9, 1.2, 1.6, 2.0)
        for b in (0.4, 0.6, 0.75, 0.9)
        if (k1, b) != (1.2, 0.75)
    ]
    out += [Knobs(f"context {c}", context=c) for c in (0.0, 0.15, 0.5, 0.8, 1.2)]
    out += [Knobs(f"fusion weight {w}", weight=w) for w in (0.3, 0.4, 0.45, 0.6, 0.7, 0.8)]
    out += [
        Knobs("rrf", fusion="rrf"),
        Knobs("bm25 / best row", fusion="max"),
        Knobs("min-max both arms", fusion="minmax"),
    ]
    out += [
        Knobs("stop words out of the question", stop=True),
        Knobs("bound over known terms", bound="known"),
        Knobs("stop + known bound", stop=True, bound="known"),
    ]
    out += [Knobs(f"phrase {p}", phrase=p) for p in (0.1, 0.2, 0.4)]
    out += [Knobs(f"document prior {d}", doc=d) for d in (0.1, 0.25, 0.5)]
    out += [Knobs(f"cap {c} a document", cap=c) for c in (1, 2)]
    out += [Knobs(f"context b {cb}", ctx_b=cb) for cb in (0.0, 0.3)]
    out += [
        Knobs(f"fields title {t} path {p} head {h}", title=t, path=p, head=h)
        for t, p, h in (
            (0.3, 0.3, 0.3),
            (0.15, 0.15, 0.3),
            (0.3, 0.15, 0.5),
            (0.1, 0.1, 0.5),
            (0.3, 0.0, 0.3),
            (0.2, 0.1, 0.2),
            (0.3, 0.3, 0.0),
            (0.0, 0.0, 0.3),
        )
    ]
    out += [
        Knobs(f"neighbours {f} {a}", near=a, near_form=f)
        for f in ("max", "mean", "sum")
        for a in (0.1, 0.2, 0.3, 0.5)
    ]
    out += [
        Knobs(f"{form} fusion {w}", fusion=kind, weight=w, floor_base=True)
        for form, kind in (("z-score", "z"), ("min-max", "minmax"))
        for w in (0.4, 0.52, 0.6)
    ]
    out += [Knobs("rrf, floored on the fused score", fusion="rrf", floor_base=True)]
    out += [Knobs(f"vector Rocchio {a} top {k}", prf=a, prf_k=k) for a in (0.2, 0.5) for k in (3, 5)]
    out += [Knobs(f"row without context {a}", bare=a) for a in (0.25, 0.5)]
    out += [Knobs("row without context, the better", bare=1, mix_form="max")]
    out += [Knobs(f"context alone {a}", ctxvec=a) for a in (0.1, 0.2, 0.3)]
    out += [Knobs(f"question under its first row's {a}", asked_as=a) for a in ("title", "context")]
    out += [Knobs(f"depth {d}", depth=d) for d in (0.01, 0.02, 0.04)]
    out += [Knobs(f"hub {a} k {k}", hub=a, hub_k=k) for a in (0.05, 0.1, 0.2, 0.3) for k in (5, 20)]
    out += [Knobs(f"centre {a}", center=a) for a in (0.05, 0.1, 0.2, 0.3)]
    out += [
        Knobs(
            f"best sentence {form} {a} top {k}{' under its context' if ctx else ''}",
            sent=a,
            sent_k=k,
            sent_ctx=ctx,
            sent_form=form,
        )
        for form, shares in (("add", (0.1, 0.2, 0.4)), ("mix", (0.2, 0.35, 0.5)))
        for ctx in (False, True)
        for a in shares
        for k in (3, 5)
    ]
    return out


def grid_knobs() -> list[Knobs]:
    """The small gains of the one-at-a-time sweep, combined."""
    return [
        Knobs(f"k1 {k1} b {b} context {c} fusion {w}", k1=k1, b=b, context=c, weight=w)
        for k1 in (0.9, 1.2)
        for b in (0.5, 0.75)
        for c in (0.3, 0.5)
        for w in (0.45, 0.52)
    ]


def parse_knobs(specs: list[str]) -> list[Knobs]:
    """``name=…,k1=1.5,context=0.5``-style specs (keys are Knobs' fields)."""
    out = []
    for spec in specs:
        knobs = Knobs(name=spec)
        for item in spec.split(","):
            key, _, value = item.partition("=")
            kind = type(getattr(Knobs(), key))
            setattr(knobs, key, value == "1" if kind is bool else kind(value))
        out.append(knobs)
    return out


def chosen(args) -> list[Knobs]:
    return parse_knobs(args.knobs) if args.knobs else (grid_knobs() if args.grid else sweep_knobs())


def sweep(args, cache) -> None:
    parts, _names, questions, controls, asked = setup_dev(args, cache)
    print("| variant | found@1 | found@5 | controls empty | words median / p95 |")
    print("|---|---|---|---|---|")
    *_, first = evaluate(parts, questions, controls, asked, Knobs(), args.floor)
    for knobs in chosen(args):
        at1, at5, empty, words, hits = evaluate(parts, questions, controls, asked, knobs, args.floor)
        flips = " ".join(
            f"{'+' if h else '-'}Q{n + 1}" for n, (h, f) in enumerate(zip(hits, first, strict=True)) if h != f
        )
        print(
            f"| {knobs.name} | {at1} | {at5} | {empty}/{len(controls)} | "
            f"{statistics.median(words):.0f} / {p95(words)} | {flips} |",
            flush=True,
        )


def scifact(args, cache) -> None:
    from collections_app.metrics import ndcg_at_k, recall_at_k

    ids, documents, items, qrels = scifact_set(args)
    names = [f"{d}.txt" for d in ids]
    asked = cache.vectors([text for _qid, text in items])
    ((structure, _),) = variants(["structure:"])
    index = scratch(documents, structure, cache, names)
    parts = Parts(index, contexts_of(documents, names, structure))
    parts.cache = cache
    print(
        f"# SciFact {args.split}: {len(items)} queries, {len(documents)} documents, {len(parts.rows)} "
        f"paragraphs, {'hybrid' if asked is not None else 'lexical'}"
    )
    print("| variant | nDCG@10 | recall@100 |")
    print("|---|---|---|")
    for knobs in chosen(args):
        ndcg = recall = 0.0
        for number, (qid, text) in enumerate(items):
            fused = scores(parts, text, asked[number] if asked is not None else None, knobs)
            order = np.argsort(-fused, kind="stable")[:400]
            ranked = list(dict.fromkeys(ids[parts.rows[r].document] for r in order.tolist()))[:100]
            ndcg += ndcg_at_k(ranked, qrels[qid], k=10)
            recall += recall_at_k(ranked, set(qrels[qid]), k=100)
        print(f"| {knobs.name} | {ndcg / len(items):.4f} | {recall / len(items):.4f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("set", choices=["diagnose", "sweep", "scifact"])
    parser.add_argument("--knobs", nargs="+", help="variants as key=value,… (default: the built-in sweep)")
    parser.add_argument("--grid", action="store_true", help="the combined grid instead of the sweep")
    parser.add_argument("--floor", type=float, default=0.22)
    set_options(parser)
    args = parser.parse_args()
    cache = vector_cache(args, "precision")
    started, cpu = time.perf_counter(), time.process_time()
    {"diagnose": diagnose, "sweep": sweep, "scifact": scifact}[args.set](args, cache)
    print(
        f"# {time.perf_counter() - started:.0f}s wall, {time.process_time() - cpu:.0f}s CPU, "
        f"{cache.embedded} texts embedded",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
