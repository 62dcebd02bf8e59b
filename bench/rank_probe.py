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
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness  # noqa: E402
from bench.parent import BUDGET, dev_set, p95, variants  # noqa: E402

# A short English stop list (question words and function words), for the query-side variant only.
STOP = frozenset(
    "a an and are as at be but by can could did do does for from had has have how i if in into is it its "
    "me my of on or our should so than that the their them then there these they this to was we what "
    "when where which while who why will with would you your".split()
)


@dataclass
class Knobs:
    """One ranking variant; the defaults are the product's."""

    name: str = "base"
    k1: float = 1.2
    b: float = 0.75
    context: float = 0.3  # CONTEXT_WEIGHT
    weight: float = 0.52  # FUSION_WEIGHT
    fusion: str = "convex"  # convex | rrf | max (BM25 over the best row) | minmax (both arms min-max)
    stop: bool = False  # drop stop words from the question's lexical terms
    bound: str = "all"  # all | known (the bound over the terms the index holds)
    phrase: float = 0.0  # bonus × share of the question's adjacent content-term pairs found adjacent
    doc: float = 0.0  # bonus × the row's document's best fused score (a document prior)
    cap: int = 0  # at most this many hits of one document in the top (0: no cap)
    ctx_b: float = -1.0  # b of the context fields (-1: as the text's)
    # BM25F-style: the context split into fields, each its own BM25 and bound, each with its weight
    # (-1: the one context field at ``context``): the document title, the headings above the row's
    # own, and the row's own heading (the deepest, or the list entry over it).
    title: float = -1.0
    # Hubness: a row near many other rows (a chapter's overview) is near many questions too. ``hub``
    # × the mean cosine of the row to its ``hub_k`` nearest rows is taken off its cosine (CSLS, Conneau
    # et al. 2018, with the question's own term constant); ``center`` × the row's cosine to the
    # collection's mean direction likewise.
    hub: float = 0.0
    hub_k: int = 10
    center: float = 0.0
    # A row's fused score with ``near`` × its better neighbour's (same document), over 1 + near: the
    # answer of one paragraph is the row and its neighbours (around 1), so rank it by their evidence.
    near: float = 0.0
    # Rocchio on the vector arm: the question's vector plus ``prf`` × the mean of the ``prf_k`` best
    # rows' vectors (by the product's fused score), renormalised, then fused again.
    prf: float = 0.0
    prf_k: int = 3
    # The floor is read off the product's fused score; the variant only orders what clears it (as the
    # reranker does), so a variant on another scale keeps today's floor.
    floor_base: bool = False
    # Second vector arms: the cosine of the row embedded without its context (``bare``) or of its
    # context alone (``ctxvec``), mixed into the row's cosine with that share (``max``: the better).
    bare: float = 0.0
    ctxvec: float = 0.0
    mix_form: str = "mean"  # mean | max
    # The question embedded as a paragraph is ("context, blank line, text"), under the context (``context``)
    # or the document title (``title``) of the row the product ranks first; "" embeds it as it is.
    asked_as: str = ""
    depth: float = 0.0  # + depth × the row's heading depth (the number of headings in force over it)
    near_form: str = "max"  # max | mean | sum (both neighbours, each × near)
    path: float = 0.0
    head: float = 0.0
    extra: dict = field(default_factory=dict)


class Parts:
    """Each row's texts, contexts and term lists, the BM25 indexes per (k1, b), and the vectors."""

    def __init__(self, index, contexts):
        from ragsite.lexical import terms

        self.index, self.rows = index, index.rows
        self.cache = None
        self.readable = index.readable
        self.contexts = contexts
        from collections_app.text.context import SEPARATOR

        split = [c.split(SEPARATOR) if c else [] for c in contexts]
        self.fields = {
            "title": [p[0] if p else "" for p in split],
            "path": [" ".join(p[1:-1]) for p in split],
            "head": [p[-1] if len(p) > 1 else "" for p in split],
        }
        self.row_terms = [terms(row.text) for row in self.rows]
        self.pairs = [set(zip(t, t[1:], strict=False)) for t in self.row_terms]
        self.documents = np.array([row.document for row in self.rows])
        self.depths = np.array([len(p) - 1 if p else 0 for p in split], dtype=np.float64)
        self._bm25: dict[tuple[float, float], tuple] = {}

    def bm25(self, k1: float, b: float, ctx_b: float | None = None):
        from ragsite.lexical import BM25Index

        ctx_b = b if ctx_b is None or ctx_b < 0 else ctx_b
        key = (k1, b, ctx_b)
        if key not in self._bm25:
            self._bm25[key] = (BM25Index.from_terms(self.row_terms, k1=k1, b=b),
                               BM25Index.from_texts(self.contexts, k1=k1, b=ctx_b))
        return self._bm25[key]

    def extra_vectors(self, kind: str) -> np.ndarray:
        from collections_app.index.vector_codec import decode, encode
        from collections_app.text.stitch import carried_openings, fresh_text

        if kind not in self._bm25:
            if kind == "bare":
                carried = [n for n, _f in carried_openings((r.document, r.start, r.end) for r in self.rows)]
                texts = [fresh_text(r.text, n) for r, n in zip(self.rows, carried, strict=True)]
            else:
                texts = [c or " " for c in self.contexts]
            matrix = self.cache.vectors(texts)
            self._bm25[kind] = decode(encode(matrix), matrix.shape[1])
        return self._bm25[kind]

    def hubness(self, k: int) -> np.ndarray:
        key = ("hub", k)
        if key not in self._bm25:
            matrix = self.index.matrix.astype(np.float32)
            out = np.zeros(len(matrix))
            for start in range(0, len(matrix), 1024):
                block = matrix[start : start + 1024] @ matrix.T
                for i in range(block.shape[0]):
                    block[i, start + i] = -1.0
                kk = min(k, matrix.shape[0] - 1)
                nearest = np.partition(block, -kk, axis=1)[:, -kk:]
                out[start : start + len(block)] = nearest.mean(1)
            self._bm25[key] = out
        return self._bm25[key]

    def centred(self) -> np.ndarray:
        if "centre" not in self._bm25:
            mean = self.index.matrix.astype(np.float64).mean(0)
            self._bm25["centre"] = self.index.matrix.astype(np.float64) @ (mean / np.linalg.norm(mean))
        return self._bm25["centre"]

    def field(self, name: str, k1: float, b: float):
        from ragsite.lexical import BM25Index

        key = (name, k1, b)
        if key not in self._bm25:
            self._bm25[key] = BM25Index.from_texts(self.fields[name], k1=k1, b=b)
        return self._bm25[key]


def contexts_of(documents, names, variant):
    """Each row's context, as `measure.scratch_index` computes it (it does not keep them)."""
    from collections_app.text.chunking import chunk
    from collections_app.text.context import contexts_for

    out = []
    for number, text in enumerate(documents):
        pieces = chunk(text, variant.method, size=variant.size, overlap=variant.overlap)
        out.extend(contexts_for(names[number], text, [p.start for p in pieces], [p.entry for p in pieces]))
    return out


def lexical01(parts: Parts, question: str, knobs: Knobs) -> np.ndarray:
    from ragsite.lexical import terms

    words = terms(question)
    if knobs.stop:
        words = [w for w in words if w not in STOP] or words
    text, context = parts.bm25(knobs.k1, knobs.b, knobs.ctx_b)
    if knobs.bound == "known":
        words_t = [w for w in words if w in text.term_ids]
        t_bound = text.upper_bound(words_t) if words_t else 0.0
        words_c = [w for w in words if w in context.term_ids]
        c_bound = context.upper_bound(words_c) if words_c else 0.0
    else:
        t_bound, c_bound = text.upper_bound(words), context.upper_bound(words)
    t = text.scores(words) / t_bound if t_bound > 0 else np.zeros(len(parts.rows))
    c = context.scores(words) / c_bound if c_bound > 0 else np.zeros(len(parts.rows))
    if knobs.fusion == "max":
        t = t * t_bound / max(float((t * t_bound).max()), 1e-12)
    out = t + knobs.context * c
    if knobs.title >= 0:
        out = t.copy()
        ctx_b = knobs.b if knobs.ctx_b < 0 else knobs.ctx_b
        for name in ("title", "path", "head"):
            share = getattr(knobs, name)
            if share:
                index = parts.field(name, knobs.k1, ctx_b)
                bound = index.upper_bound(words)
                if bound > 0:
                    out = out + share * index.scores(words) / bound
    if knobs.phrase:
        content = [w for w in terms(question) if w not in STOP]
        wanted = set(zip(content, content[1:], strict=False))
        if wanted:
            out = out + knobs.phrase * np.array([len(wanted & p) / len(wanted) for p in parts.pairs])
    return np.clip(out, 0.0, 1.0)


def scores(parts: Parts, question: str, vector, knobs: Knobs) -> np.ndarray:
    if knobs.asked_as and vector is not None:
        first = int(np.argmax(scores(parts, question, vector, replace(knobs, asked_as=""))))
        context = parts.contexts[first] if knobs.asked_as == "context" else parts.fields["title"][first]
        vector = parts.cache.vectors([f"{context}\n\n{question}" if context else question])[0]
    if knobs.prf and vector is not None:
        first = scores(parts, question, vector, replace(knobs, prf=0.0))
        top = np.argsort(-first, kind="stable")[: knobs.prf_k]
        moved = vector + knobs.prf * parts.index.matrix[top].astype(np.float32).mean(0)
        vector = moved / np.linalg.norm(moved)
    lex = lexical01(parts, question, knobs)
    if vector is None:
        fused = lex
    else:
        cos = parts.index.row_cosines(vector).astype(np.float64)
        for kind in ("bare", "ctxvec"):
            share = getattr(knobs, kind)
            if share:
                other = (parts.extra_vectors(kind) @ np.asarray(vector, dtype=np.float32)).astype(np.float64)
                cos = np.maximum(cos, other) if knobs.mix_form == "max" else (1 - share) * cos + share * other
        if knobs.hub:
            hub = parts.hubness(knobs.hub_k)
            cos = cos - knobs.hub * (hub - hub.mean())  # around the mean: an average row keeps its cosine
        if knobs.center:
            centre = parts.centred()
            cos = cos - knobs.center * (centre - centre.mean())
        cos = np.clip(cos, 0.0, 1.0)
        if knobs.fusion == "rrf":
            fused = np.zeros(len(lex))
            for arm in (cos, lex):
                order = np.argsort(-arm, kind="stable")
                fused[order] += 1.0 / (60 + np.arange(1, len(arm) + 1))
            return fused * 30.0  # on a scale the floor 0.22 does not cut at all near the top
        if knobs.fusion == "z":
            cos = (cos - cos.mean()) / max(cos.std(), 1e-12)
            lex = (lex - lex.mean()) / max(lex.std(), 1e-12)
        if knobs.fusion == "minmax":
            cos = (cos - cos.min()) / max(cos.max() - cos.min(), 1e-12)
            lex = (lex - lex.min()) / max(lex.max() - lex.min(), 1e-12)
        fused = knobs.weight * cos + (1 - knobs.weight) * lex
    if knobs.depth:
        fused = fused + knobs.depth * parts.depths
    if knobs.near:
        fused = smoothed(fused, parts.documents, knobs.near, knobs.near_form)
    if knobs.doc:
        best = np.zeros(parts.documents.max() + 1)
        np.maximum.at(best, parts.documents, fused)
        fused = (fused + knobs.doc * best[parts.documents]) / (1 + knobs.doc)
    return fused


def smoothed(fused: np.ndarray, documents: np.ndarray, near: float, form: str) -> np.ndarray:
    before = np.zeros_like(fused)
    after = np.zeros_like(fused)
    same = documents[1:] == documents[:-1]
    before[1:] = np.where(same, fused[:-1], 0.0)
    after[:-1] = np.where(same, fused[1:], 0.0)
    if form == "max":
        return (fused + near * np.maximum(before, after)) / (1 + near)
    if form == "mean":
        return (fused + near * (before + after) / 2) / (1 + near)
    return (fused + near * (before + after)) / (1 + 2 * near)


def answer(parts: Parts, fused: np.ndarray, most: int, floor: float, knobs: Knobs, base=None):
    from collections_app.ranking import top_at_floor
    from collections_app.text.budget import fit
    from collections_app.text.stitch import stitch

    if base is not None:  # floored on the product's score, ordered by the variant's
        fused = np.where(base >= floor, fused - fused.min() + 1.0, 0.0)
        floor = 1.0
    top = top_at_floor(fused, floor, max(most * 4, most) if knobs.cap else most)
    if knobs.cap:
        kept, per = [], {}
        for row in top.tolist():
            d = parts.rows[row].document
            if per.get(d, 0) < knobs.cap:
                kept.append(row)
                per[d] = per.get(d, 0) + 1
        top = np.array(kept[:most], dtype=np.int64)
    runs = stitch([(int(r), float(fused[r])) for r in top], parts.readable, 1)
    return fit(runs, parts.readable, BUDGET).runs


def evaluate(parts, questions, controls, asked, knobs: Knobs, floor: float = 0.22):
    from collections_app import measure as m

    at1 = at5 = 0
    hits1 = []
    words = []
    for number, question in enumerate(questions):
        vector = asked[number] if asked is not None else None
        fused = scores(parts, question.text, vector, knobs)
        base = scores(parts, question.text, vector, Knobs()) if knobs.floor_base else None
        five = answer(parts, fused, 5, floor, knobs, base)
        words.append(sum(len(run.text.split()) for run in five))
        at5 += m.find_answer(five, question.answer)["found"]
        one = m.find_answer(answer(parts, fused, 1, floor, knobs, base), question.answer)["found"]
        at1 += one
        hits1.append(one)
    empty = 0
    for n, text in enumerate(controls):
        vector = asked[len(questions) + n] if asked is not None else None
        base = scores(parts, text, vector, Knobs()) if knobs.floor_base else None
        empty += not answer(parts, scores(parts, text, vector, knobs), 1, floor, knobs, base)
    return at1, at5, empty, words, hits1


def setup_dev(args, cache):
    from collections_app import measure as m

    folder, documents, names, questions, controls, asked = dev_set(args, cache)
    (structure, _), = variants(["structure:"])
    index = m.scratch_index(documents, structure, cache=cache, names=names)
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
            holding = [r.ordinal for r in parts.rows[:-1]
                       if marker in normalise(r.text + " " + parts.rows[r.ordinal + 1].text)]
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
        print(f"\n## Q{number + 1}: {question.text}\n   marker rows {holding} {'(split)' if split else ''}; "
              f"rank hybrid {rank_of(fused, holding)} lexical {rank_of(lex, holding)} "
              f"vector {rank_of(cos, holding)}")
        if best is not None:
            print(f"   right: {names[parts.rows[best].document]} [{parts.contexts[best][:80]}] "
                  f"fused {fused[best]:.3f} lex {lex[best]:.3f} cos {cos[best]:.3f}")
        print(f"   top:   {names[parts.rows[top].document]} [{parts.contexts[top][:80]}] "
              f"fused {fused[top]:.3f} lex {lex[top]:.3f} cos {cos[top]:.3f} "
              f"{'same document' if same else 'OTHER DOCUMENT'}; rows apart "
              f"{abs(top - best) if best is not None else '-'}")
        print(f"   question content terms {len(q_terms)}, in the corpus {len(known)}, in the right row "
              f"{len(in_row)}: missing {sorted(set(q_terms) - set(in_row))}")


def sweep_knobs() -> list[Knobs]:
    out = [Knobs()]
    out += [Knobs(f"k1 {k1} b {b}", k1=k1, b=b) for k1 in (0.9, 1.2, 1.6, 2.0) for b in (0.4, 0.6, 0.75, 0.9)
            if (k1, b) != (1.2, 0.75)]
    out += [Knobs(f"context {c}", context=c) for c in (0.0, 0.15, 0.5, 0.8, 1.2)]
    out += [Knobs(f"fusion weight {w}", weight=w) for w in (0.3, 0.4, 0.45, 0.6, 0.7, 0.8)]
    out += [Knobs("rrf", fusion="rrf"), Knobs("bm25 / best row", fusion="max"),
            Knobs("min-max both arms", fusion="minmax")]
    out += [Knobs("stop words out of the question", stop=True),
            Knobs("bound over known terms", bound="known"),
            Knobs("stop + known bound", stop=True, bound="known")]
    out += [Knobs(f"phrase {p}", phrase=p) for p in (0.1, 0.2, 0.4)]
    out += [Knobs(f"document prior {d}", doc=d) for d in (0.1, 0.25, 0.5)]
    out += [Knobs(f"cap {c} a document", cap=c) for c in (1, 2)]
    out += [Knobs(f"context b {cb}", ctx_b=cb) for cb in (0.0, 0.3)]
    out += [Knobs(f"fields title {t} path {p} head {h}", title=t, path=p, head=h)
            for t, p, h in ((0.3, 0.3, 0.3), (0.15, 0.15, 0.3), (0.3, 0.15, 0.5), (0.1, 0.1, 0.5),
                            (0.3, 0.0, 0.3), (0.2, 0.1, 0.2), (0.3, 0.3, 0.0), (0.0, 0.0, 0.3))]
    out += [Knobs(f"neighbours {f} {a}", near=a, near_form=f) for f in ("max", "mean", "sum")
            for a in (0.1, 0.2, 0.3, 0.5)]
    out += [Knobs(f"{form} fusion {w}", fusion=kind, weight=w, floor_base=True)
            for form, kind in (("z-score", "z"), ("min-max", "minmax")) for w in (0.4, 0.52, 0.6)]
    out += [Knobs("rrf, floored on the fused score", fusion="rrf", floor_base=True)]
    out += [Knobs(f"vector Rocchio {a} top {k}", prf=a, prf_k=k) for a in (0.2, 0.5) for k in (3, 5)]
    out += [Knobs(f"row without context {a}", bare=a) for a in (0.25, 0.5)]
    out += [Knobs("row without context, the better", bare=1, mix_form="max")]
    out += [Knobs(f"context alone {a}", ctxvec=a) for a in (0.1, 0.2, 0.3)]
    out += [Knobs(f"question under its first row's {a}", asked_as=a) for a in ("title", "context")]
    out += [Knobs(f"depth {d}", depth=d) for d in (0.01, 0.02, 0.04)]
    out += [Knobs(f"hub {a} k {k}", hub=a, hub_k=k) for a in (0.05, 0.1, 0.2, 0.3) for k in (5, 20)]
    out += [Knobs(f"centre {a}", center=a) for a in (0.05, 0.1, 0.2, 0.3)]
    return out


def grid_knobs() -> list[Knobs]:
    """The small gains of the one-at-a-time sweep, combined."""
    return [Knobs(f"k1 {k1} b {b} context {c} fusion {w}", k1=k1, b=b, context=c, weight=w)
            for k1 in (0.9, 1.2) for b in (0.5, 0.75) for c in (0.3, 0.5) for w in (0.45, 0.52)]


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
        flips = " ".join(f"{'+' if h else '-'}Q{n + 1}"
                         for n, (h, f) in enumerate(zip(hits, first, strict=True)) if h != f)
        print(f"| {knobs.name} | {at1} | {at5} | {empty}/{len(controls)} | "
              f"{statistics.median(words):.0f} / {p95(words)} | {flips} |", flush=True)


def scifact(args, cache) -> None:
    from bench.beir import load
    from collections_app import measure as m
    from collections_app.metrics import ndcg_at_k, recall_at_k

    corpus, queries, qrels = load(args.dataset, args.split)
    if args.sample is not None:
        relevant = {doc for judged in qrels.values() for doc in judged}
        others = [doc for doc in sorted(corpus) if doc not in relevant][: args.sample]
        corpus = {doc: corpus[doc] for doc in sorted(relevant | set(others)) if doc in corpus}
    ids = sorted(corpus)
    documents = [f"{corpus[d][0]}\n\n{corpus[d][1]}".strip() + "\n" for d in ids]
    names = [f"{d}.txt" for d in ids]
    items = [(qid, queries[qid]) for qid in qrels if qid in queries]
    asked = cache.vectors([text for _qid, text in items])
    (structure, _), = variants(["structure:"])
    index = m.scratch_index(documents, structure, cache=cache, names=names)
    parts = Parts(index, contexts_of(documents, names, structure))
    parts.cache = cache
    print(f"# SciFact {args.split}: {len(items)} queries, {len(documents)} documents, {len(parts.rows)} "
          f"paragraphs, {'hybrid' if asked is not None else 'lexical'}")
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
    parser.add_argument("--dataset", type=Path, default=harness.SCIFACT)
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--questions", type=Path)
    parser.add_argument("--split", choices=["train", "test"], default="train")
    parser.add_argument("--hybrid", action="store_true")
    parser.add_argument("--sample", type=int, default=None)
    args = parser.parse_args()
    lexical = args.set == "scifact" and not args.hybrid
    harness.setup("precision", backend="none" if lexical else None)
    from collections_app import measure as m
    from ragsite import embedding

    cache = m.VectorCache(None if lexical else embedding.get_embedder().embed)
    started, cpu = time.perf_counter(), time.process_time()
    {"diagnose": diagnose, "sweep": sweep, "scifact": scifact}[args.set](args, cache)
    print(f"# {time.perf_counter() - started:.0f}s wall, {time.process_time() - cpu:.0f}s CPU, "
          f"{cache.embedded} texts embedded", file=sys.stderr)


if __name__ == "__main__":
    main()
