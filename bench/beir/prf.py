"""Pseudo-relevance feedback and rank-aware fusion on SciFact, scored offline over one build's index.

    python bench/beir/prf.py ../shared/datasets/scifact --split train
    python bench/beir/prf.py ../shared/datasets/scifact --split test --chosen

The collection is built as `beir_sweep.py` builds it (the product's build, every embedding from the
caches), and each question's parts are read once from the mapped index: every window's cosine and the
text's and title's BM25. The product's ranking is then recomputed in numpy (`windows.pool_windows`,
`context.lexical_with_context`, `fusion.hybrid_scores` at `FUSION_WEIGHT`), and the row ``base``'s
nDCG@10 must equal `beir.py --mode hybrid` on the same split, claim by claim. Its recall@100 is over the
top 100 paragraphs, higher than beir.py's, which counts what the answer's character budget returns.
Each idea is one change to that ranking (K hits, T terms, B and L shares, W a weight):

* ``rocchio-K-B``: the vector leg moved toward the top K hybrid hits: ``(1 - B) cos(q, p) + B mean_j
  cos(d_j, p)`` over the first-window vectors d_j of the K hits (Rocchio's query update written on
  the scores, so it stays on the cosine's absolute scale; one more matrix-vector product);
  ``xrocchio-K-B`` takes the K hits from the lexical leg alone (the lexical leg teaching the vector);
* ``rm3-K-T-L``: the lexical leg mixed with the BM25 of T expansion terms drawn from the top K hits
  (RM3: each hit's term distribution weighted by its fused score, terms ranked by that weight times
  idf, question terms left out): ``(1 - L) lexical + L expansion``, each over its own upper bound;
  ``xrm3-K-T-L`` draws them from the vector leg's top K;
* ``rrf-E``: the fused score plus ``E`` times reciprocal rank fusion (k 60) of the two legs' ranks;
* ``bigram-G``: the fused score plus ``G`` times the idf-weighted share of the question's adjacent
  term pairs the paragraph holds adjacent (over the top 100, a proximity rerank);
* ``shift-S-W``: the cosine measured from the question's own baseline s, ``(cos - s) / (1 - s)``,
  s the mean cosine over the paragraphs (``mean``) or a quantile (``q0.99``), fused at weight W;
* ``z-W``: both legs as z-scores over the paragraphs, fused at weight W (no absolute scale);
* ``gap-A``: a weight per question leaning toward the leg whose top hit stands further above its
  tenth: ``FUSION_WEIGHT + A (gv / (gv + gl) - 1/2)``;
* ``rare-G``: the fused score plus ``G`` for a paragraph holding the question's rarest term;
* ``vec``, ``lex``: one leg alone (for reading which claims each leg wins).

Prints nDCG@10 and recall@100 per setting, with a 95 % bootstrap interval over the questions of the
setting's nDCG@10 and of its paired difference from ``base`` (2,000 resamples, seed 0).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections import Counter
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.beir import beir  # noqa: E402
from bench.common import results  # noqa: E402
from collections_app.metrics import ndcg_at_k, recall_at_k  # noqa: E402
from collections_app.text.context import lexical_with_context  # noqa: E402
from collections_app.text.windows import pool_windows  # noqa: E402
from ragsite import fusion  # noqa: E402
from ragsite.fusion import hybrid_scores, normalise_bm25, normalise_cosine  # noqa: E402
from ragsite.lexical import terms  # noqa: E402
from ragsite.top import top_rows  # noqa: E402

# The train sweep behind docs/benchmarks.md ("Feedback and fusion variants"); the best of each family on
# train, read once on test, is CHOSEN.
DEFAULT = (
    ["base", "vec", "lex"]
    + [f"rocchio-{k}-{b}" for k in (3, 5, 10) for b in (0.1, 0.2, 0.3, 0.5)]
    + [f"xrocchio-{k}-{b}" for k in (1, 3) for b in (0.1, 0.2, 0.3)]
    + [f"rm3-{k}-{t}-{lam}" for k in (3, 5, 10) for t in (10, 20) for lam in (0.1, 0.2, 0.3)]
    + [f"xrm3-{k}-20-{lam}" for k in (1, 3) for lam in (0.1, 0.2)]
    + [f"rrf-{e}" for e in (0.5, 1, 2, 4)]
    + [f"bigram-{g}" for g in (0.02, 0.05, 0.1, 0.2, 0.3)]
    + [f"shift-mean-{w}" for w in (0.3, 0.35, 0.4, 0.45, 0.48, 0.52, 0.56, 0.6)]
    + [f"shift-{q}-{w}" for q in ("q0.5", "q0.9", "q0.99") for w in (0.4, 0.48, 0.56)]
    + [f"z-{w}" for w in (0.3, 0.4, 0.5, 0.6, 0.7)]
    + [f"gap-{a}" for a in (0.1, 0.2, 0.3, 0.5, 0.8)]
    + [f"rare-{g}" for g in (0.01, 0.02, 0.04, 0.08)]
)
CHOSEN = (
    "base",
    "rocchio-3-0.1",
    "xrocchio-3-0.1",
    "rm3-3-20-0.1",
    "xrm3-3-20-0.2",
    "rrf-0.5",
    "bigram-0.02",
    "shift-mean-0.48",
    "shift-q0.99-0.48",
    "z-0.7",
    "gap-0.3",
    "rare-0.01",
)


def bootstrap(values: np.ndarray, resamples: int = 2000) -> tuple[float, float]:
    """The 95 % interval of the mean of ``values`` over resampled questions (seed 0)."""
    rng = np.random.default_rng(0)
    picks = rng.integers(0, values.size, size=(resamples, values.size))
    means = values[picks].mean(axis=1)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def rrf_ranks(scores: np.ndarray) -> np.ndarray:
    """Each row's 1 / (60 + rank), rank from 1 by descending score (ties to the lower row)."""
    order = np.lexsort((np.arange(scores.size), -scores))
    ranks = np.empty(scores.size, dtype=np.float64)
    ranks[order] = np.arange(1, scores.size + 1)
    return 1.0 / (60.0 + ranks)


def idf(n_rows: int, df: int) -> float:
    return math.log(1 + (n_rows - df + 0.5) / (df + 0.5))


@dataclass
class Corpus:
    """The build's index and what the ideas read of each paragraph (its terms and adjacent pairs, from the
    corpus's title and text as the collection's file holds them)."""

    index: object
    vectors: np.ndarray  # every window's vector, float32
    starts: np.ndarray  # each paragraph's first window
    row_terms: list[Counter]
    row_pairs: list[set]
    df: Counter

    @property
    def firsts(self) -> np.ndarray:
        return self.vectors[self.starts]


class Question:
    """One question's two legs as the product fuses them, and each idea's scores over every paragraph."""

    def __init__(self, corpus: Corpus, text: str, vector: np.ndarray) -> None:
        self.corpus = corpus
        self.words = terms(text)
        index = corpus.index
        self.cosine = pool_windows(corpus.vectors @ np.asarray(vector, dtype=np.float32), corpus.starts)
        text_bm25, text_bound = index.bm25(self.words)
        context_bm25, context_bound = (
            index.context.bm25(self.words) if index.context is not None else (None, 0.0)
        )
        lexical, bound = lexical_with_context(text_bm25, text_bound, context_bm25, context_bound)
        self.base, _ = hybrid_scores(self.cosine, lexical, bound, weight=fusion.FUSION_WEIGHT)
        self.cosine01 = normalise_cosine(self.cosine)
        self.lexical01 = normalise_bm25(lexical, bound)
        self.hits = {
            "hybrid": top_rows(self.base, None, 10),
            "lexical": top_rows(self.lexical01, None, 10),
            "vector": top_rows(self.cosine01, None, 10),
        }
        self.expansion = cache(self._expansion)
        self.rocchio = cache(self._rocchio)
        self.bigrams = cache(self._bigrams)

    def fused(self, vector01: np.ndarray, lexical01: np.ndarray, weight: float | None = None) -> np.ndarray:
        return fusion.convex(vector01, lexical01, fusion.FUSION_WEIGHT if weight is None else weight)

    def _expansion(self, k: int, t: int, leg: str) -> np.ndarray:
        """RM3's expansion terms from the leg's top ``k``, their BM25 on [0, 1] over their own bound."""
        corpus, n_rows = self.corpus, self.corpus.index.size
        mass: Counter = Counter()
        for row in self.hits[leg][:k]:
            counts = corpus.row_terms[row]
            length = sum(counts.values()) or 1
            for term, tf in counts.items():
                mass[term] += float(self.base[row]) * tf / length
        asked = set(self.words)
        ranked = sorted(
            ((m * idf(n_rows, corpus.df[term]), term) for term, m in mass.items() if term not in asked),
            reverse=True,
        )[:t]
        total = sum(w for w, _ in ranked) or 1.0
        scores, bound = np.zeros(n_rows), 0.0
        for w, term in ranked:
            term_scores, term_bound = corpus.index.bm25([term])
            scores += (w / total) * term_scores
            bound += (w / total) * term_bound
        return normalise_bm25(scores, bound)

    def _rocchio(self, k: int, b: float, leg: str) -> np.ndarray:
        centre = self.corpus.firsts[self.hits[leg][:k]].mean(axis=0)
        moved = normalise_cosine(pool_windows(self.corpus.vectors @ centre, self.corpus.starts))
        return (1 - b) * self.cosine01 + b * moved

    def _bigrams(self) -> np.ndarray:
        """Over the top 100 by base: the idf-weighted share of the question's adjacent term pairs that the
        paragraph holds adjacent (0 elsewhere)."""
        corpus, n_rows = self.corpus, self.corpus.index.size
        asked = list(zip(self.words, self.words[1:], strict=False))
        weights = [idf(n_rows, corpus.df[a]) + idf(n_rows, corpus.df[b]) for a, b in asked]
        feature = np.zeros(n_rows)
        for row in top_rows(self.base, None, 100):
            held = corpus.row_pairs[row]
            feature[row] = sum(w for pair, w in zip(asked, weights, strict=True) if pair in held)
        return feature / (sum(weights) or 1.0)

    def rarest(self) -> np.ndarray:
        """1 for each paragraph holding the question's rarest term (the highest idf among its terms the
        corpus holds), else 0."""
        held = [term for term in set(self.words) if self.corpus.df[term] > 0]
        if not held:
            return np.zeros(self.corpus.index.size)
        term = min(held, key=lambda t: (self.corpus.df[t], t))
        return np.asarray([term in counts for counts in self.corpus.row_terms], dtype=np.float64)

    def scores(self, setting: str) -> np.ndarray:
        """Every paragraph's score under ``setting`` (module docstring)."""
        kind, *parts = setting.split("-")
        if kind == "base":
            return self.base
        if kind == "vec":
            return self.cosine01
        if kind == "lex":
            return self.lexical01
        if kind in ("rocchio", "xrocchio"):
            leg = "hybrid" if kind == "rocchio" else "lexical"
            return self.fused(self.rocchio(int(parts[0]), float(parts[1]), leg), self.lexical01)
        if kind in ("rm3", "xrm3"):
            leg = "hybrid" if kind == "rm3" else "vector"
            share = float(parts[2])
            expansion = self.expansion(int(parts[0]), int(parts[1]), leg)
            return self.fused(self.cosine01, (1 - share) * self.lexical01 + share * expansion)
        if kind == "rare":
            return self.base + float(parts[0]) * self.rarest()
        if kind == "rrf":
            return self.base + float(parts[0]) * (rrf_ranks(self.cosine01) + rrf_ranks(self.lexical01))
        if kind == "bigram":
            return self.base + float(parts[0]) * self.bigrams()
        if kind == "shift":
            what, weight = parts[0], float(parts[1])
            s = (
                float(self.cosine.mean())
                if what == "mean"
                else float(np.quantile(self.cosine, float(what[1:])))
            )
            return self.fused(normalise_cosine((self.cosine - s) / (1 - s)), self.lexical01, weight)
        if kind == "z":
            weight = float(parts[0])
            zv = (self.cosine01 - self.cosine01.mean()) / (self.cosine01.std() or 1.0)
            zl = (self.lexical01 - self.lexical01.mean()) / (self.lexical01.std() or 1.0)
            return weight * zv + (1 - weight) * zl
        if kind == "gap":
            gv = float(np.diff(np.sort(self.cosine01)[[-10, -1]])[0])
            gl = float(np.diff(np.sort(self.lexical01)[[-10, -1]])[0])
            share = gv / (gv + gl) if gv + gl > 0 else 0.5
            weight = min(max(fusion.FUSION_WEIGHT + float(parts[0]) * (share - 0.5), 0.0), 1.0)
            return self.fused(self.cosine01, self.lexical01, weight)
        raise SystemExit(f"unknown setting {setting!r}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--split", choices=["test", "train"], default="train")
    parser.add_argument("--only", nargs="+", default=None, help="settings (module docstring)")
    parser.add_argument(
        "--chosen", action="store_true", help="only the best of each family on train (CHOSEN), for test"
    )
    parser.add_argument(
        "--json", type=Path, help="write the figures here (default: bench/results/prf-scifact-<split>.json)"
    )
    args = parser.parse_args()
    settings_list = args.only or list(CHOSEN if args.chosen else DEFAULT)

    # The product's build: float16 vectors, every window, the store and caches of `beir.py --mode hybrid`.
    _agent, collection, queries, qrels = beir.prepare(beir.product_build(args.dataset, args.split))
    from collections_app.models import Document
    from collections_app.services import search as search_service
    from collections_app.services.search.rows import current_build
    from ragsite import embedding

    index = search_service.collection_index(collection, current_build(collection))
    names = dict(Document.objects.filter(collection=collection).values_list("pk", "name"))
    documents = [names[int(pk)].removesuffix(".txt") for pk in np.asarray(index.row_document)]
    texts = beir.read_corpus(args.dataset)
    sequences = [terms(f"{texts[d][0]}\n\n{texts[d][1]}") for d in documents]
    row_terms = [Counter(sequence) for sequence in sequences]
    corpus = Corpus(
        index=index,
        vectors=np.asarray(index.vectors, dtype=np.float32),
        starts=np.flatnonzero(np.diff(np.asarray(index.vector_row), prepend=-1)),
        row_terms=row_terms,
        row_pairs=[set(zip(sequence, sequence[1:], strict=False)) for sequence in sequences],
        df=Counter(term for counts in row_terms for term in counts),
    )

    items = list(queries.items())
    vectors = embedding.get_embedder().embed_with_usage([text for _qid, text in items]).vectors
    ndcgs: dict[str, list[float]] = {setting: [] for setting in settings_list}
    recalls: dict[str, list[float]] = {setting: [] for setting in settings_list}
    for number, ((qid, text), vector) in enumerate(zip(items, vectors, strict=True)):
        question = Question(corpus, text, vector)
        for setting in settings_list:
            ranked = [documents[row] for row in top_rows(question.scores(setting), None, 100)]
            ndcgs[setting].append(ndcg_at_k(ranked, qrels[qid], k=10))
            recalls[setting].append(recall_at_k(ranked, set(qrels[qid]), k=100))
        if number % 100 == 99:
            print(f"# {number + 1} of {len(items)}", file=sys.stderr, flush=True)

    base = np.asarray(ndcgs[settings_list[0]])
    print(f"# {args.split}, {len(items)} claims; differences are paired against {settings_list[0]}")
    print("| setting | nDCG@10 [95 %] | recall@100 | difference [95 %] | better / worse |")
    print("|---|---|---|---|---|")
    for setting in settings_list:
        values = np.asarray(ndcgs[setting])
        low, high = bootstrap(values)
        diff = values - base
        dlow, dhigh = bootstrap(diff)
        print(
            f"| {setting} | {values.mean():.4f} [{low:.4f}, {high:.4f}] | {np.mean(recalls[setting]):.4f} | "
            f"{diff.mean():+.4f} [{dlow:+.4f}, {dhigh:+.4f}] | {int((diff > 1e-9).sum())} / "
            f"{int((diff < -1e-9).sum())} |",
            flush=True,
        )
    qids = [qid for qid, _ in items]
    figures = {
        "dataset": args.dataset.resolve().name,
        "split": args.split,
        "queries": len(items),
        "fusion_weight": fusion.FUSION_WEIGHT,
        "settings": {
            setting: {
                "ndcg@10": float(np.mean(ndcgs[setting])),
                "recall@100": float(np.mean(recalls[setting])),
                # per claim only where it is read again (paired comparisons), so the sweep's file stays small
                **(
                    {"ndcg@10_per_query": dict(zip(qids, ndcgs[setting], strict=True))}
                    if setting in (*CHOSEN, "vec", "lex")
                    else {}
                ),
            }
            for setting in settings_list
        },
    }
    print("# written to", results.save(f"prf-scifact-{args.split}", figures, args.json), file=sys.stderr)


if __name__ == "__main__":
    main()
