"""The ranking variants of `bench/rank_probe.py` (issue 28, Session 9): what a variant may change
(`Knobs`), the parts of a built structure index it re-scores (`Parts`), and the answer it then gives
through the search's own floor, stitching and budget fit (`answer`, `evaluate`).

``Knobs()`` is the product as it is, read from its constants: seed 004's BM25 (`lexical.DEFAULT_K1`,
`DEFAULT_B`), `CONTEXT_WEIGHT`, and the convex fusion of `fusion.hybrid_scores` at `FUSION_WEIGHT`.
Bench-only: the application never imports this.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from bench.parent import BUDGET
from collections_app.text.context import CONTEXT_WEIGHT
from ragsite.fusion import FUSION_WEIGHT
from ragsite.lexical import DEFAULT_B, DEFAULT_K1

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
    k1: float = DEFAULT_K1
    b: float = DEFAULT_B
    context: float = CONTEXT_WEIGHT
    weight: float = FUSION_WEIGHT
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
    # The top ``sent_k`` rows re-ordered by their best sentence: each sentence of a row embedded alone
    # (or under the row's context, ``sent_ctx``) and the row's best cosine to the question taken;
    # ``sent`` × that cosine is added to the top rows' fused scores (``sent_form`` "add"), or the top
    # rows' own scores are handed out again in the order of (1 − sent) × fused + sent × best ("mix"),
    # so that only their order changes.
    sent: float = 0.0
    sent_k: int = 5
    sent_ctx: bool = False
    sent_form: str = "add"


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
            self._bm25[key] = (
                BM25Index.from_terms(self.row_terms, k1=k1, b=b),
                BM25Index.from_texts(self.contexts, k1=k1, b=ctx_b),
            )
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

    @property
    def first_windows(self) -> np.ndarray:
        """One vector a row, its first window's (a long paragraph is stored as its windows); taken once."""
        if "first windows" not in self._bm25:
            window_row = self.index.window_row
            self._bm25["first windows"] = (
                self.index.matrix
                if window_row is None
                else self.index.matrix[np.flatnonzero(np.diff(window_row, prepend=-1))]
            )
        return self._bm25["first windows"]

    def best_sentence(self, vector, with_context: bool) -> np.ndarray:
        """Each row's best cosine between the question and one of its sentences (-1: no sentence)."""
        key = ("sentences", with_context)
        if key not in self._bm25:
            owners, texts = [], []
            for number, row in enumerate(self.rows):
                context = self.contexts[number]
                for sentence in sentences(row.text):
                    owners.append(number)
                    texts.append(f"{context}\n\n{sentence}" if with_context and context else sentence)
            self._bm25[key] = (np.array(owners), self.cache.vectors(texts))
        owners, matrix = self._bm25[key]
        best = np.full(len(self.rows), -1.0)
        np.maximum.at(best, owners, (matrix @ np.asarray(vector, dtype=np.float32)).astype(np.float64))
        return best

    def hubness(self, k: int) -> np.ndarray:
        key = ("hub", k)
        if key not in self._bm25:
            matrix = self.first_windows.astype(np.float32)
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
            mean = self.first_windows.astype(np.float64).mean(0)
            self._bm25["centre"] = self.first_windows.astype(np.float64) @ (mean / np.linalg.norm(mean))
        return self._bm25["centre"]

    def field(self, name: str, k1: float, b: float):
        from ragsite.lexical import BM25Index

        key = (name, k1, b)
        if key not in self._bm25:
            self._bm25[key] = BM25Index.from_texts(self.fields[name], k1=k1, b=b)
        return self._bm25[key]


def sentences(text: str) -> list[str]:
    """A row's lines cut at sentence ends (the chunkers' `SENTENCE_BREAK`), those of more than 20
    characters (the row itself when it has none)."""
    from collections_app.text.headings import SENTENCE_BREAK

    found = []
    for line in text.splitlines():
        start = 0
        for match in SENTENCE_BREAK.finditer(line):
            found.append(line[start : match.start(1)].strip())
            start = match.end(1)
        found.append(line[start:].strip())
    return [s for s in found if len(s) > 20] or [text]


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
        moved = vector + knobs.prf * parts.first_windows[top].astype(np.float32).mean(0)
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
    if knobs.sent and vector is not None:
        fused = by_best_sentence(parts, fused, vector, knobs)
    if knobs.depth:
        fused = fused + knobs.depth * parts.depths
    if knobs.near:
        fused = smoothed(fused, parts.documents, knobs.near, knobs.near_form)
    if knobs.doc:
        best = np.zeros(parts.documents.max() + 1)
        np.maximum.at(best, parts.documents, fused)
        fused = (fused + knobs.doc * best[parts.documents]) / (1 + knobs.doc)
    return fused


def by_best_sentence(parts: Parts, fused: np.ndarray, vector, knobs: Knobs) -> np.ndarray:
    best = parts.best_sentence(vector, knobs.sent_ctx)
    top = np.argsort(-fused, kind="stable")[: knobs.sent_k]
    out = fused.copy()
    if knobs.sent_form == "add":
        out[top] = fused[top] + knobs.sent * best[top]
    else:
        order = top[np.argsort(-((1 - knobs.sent) * fused[top] + knobs.sent * best[top]), kind="stable")]
        out[order] = np.sort(fused[top])[::-1]
    return out


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
