"""Structure paragraphs ranked with the help of their small pieces (issue 28, after Session 8: parent).

    python bench/precision.py dev --shares 0 0.3 0.5           # the known-answers dev set, hybrid
    python bench/precision.py dev --corpus data/bench/man-shelf --questions bench/man_shelf/questions.jsonl
    python bench/precision.py scifact --split train --shares 0 0.3 0.5   # lexical unless --hybrid

A *blend* keeps structure's paragraphs (1,800/180, around 1) as what is ranked and returned, and scores
each one as ``(1 - share) × its own score + share × the best score of the parent strategy's pieces
inside it`` (a piece is inside a paragraph when their spans overlap in the same document; both arms,
BM25 over the bound as `fusion.normalise_bm25` takes it and the pooled cosine, blended alike, each with
its contexts: a list entry's piece carries its term). Share 0 is structure as it is. The answer is
stitched and fitted exactly as `bench/parent.py` asks structure (`parent.ask`), so the figures compare
with its tables; found@1 is the answer asked for one paragraph (issue 28 item 4).

``--entries [marked]``: instead of a blend, a paragraph scores the max of its own score and ``share`` ×
the best of the list-entry pieces inside it (prose pieces do not count; ``marked``: only entries whose
first line is a list item, an option or a table row, since a term over deeper lines is also unfenced
code). ``--whole N`` / ``--whole-documents N``: structure keeps a section / a document of at most N
characters as one piece. ``edge``: parent 400 §3,000 whose run looks ``--looks`` characters into the
neighbouring section when its hit is the section's edge piece. Variants are patched in here only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.parent import ask, dev_set, p95, scifact_set, scratch, set_options, variants, vector_cache  # noqa: E402


class Blend:
    """The `Scorable` protocol over a structure index, each row's score blended with its best piece's."""

    def __init__(self, rows_index, pieces_index, share: float, entries=None) -> None:
        """``entries`` (document → list-entry spans): only pieces inside one count, by max, not blend."""
        self.outer, self.inner, self.share, self.entries = rows_index, pieces_index, share, entries
        self.rows, self.matrix = rows_index.rows, rows_index.matrix
        pairs = []
        by_document: dict[int, list] = {}
        for row in rows_index.rows:
            by_document.setdefault(row.document, []).append(row)
        for piece in pieces_index.rows:
            if entries is not None and not any(
                a <= piece.start and piece.end <= b for a, b in entries.get(piece.document, ())
            ):
                continue
            for row in by_document.get(piece.document, ()):
                if piece.start < row.end and piece.end > row.start:
                    pairs.append((piece.ordinal, row.ordinal))
        pairs_array = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        self.piece_of, self.row_of = pairs_array[:, 0], pairs_array[:, 1]

    @property
    def readable(self):
        return self.outer.readable

    @property
    def size(self) -> int:
        return self.outer.size

    def _best(self, piece_scores: np.ndarray) -> np.ndarray:
        best = np.zeros(self.size, dtype=np.float64)
        np.maximum.at(best, self.row_of, np.asarray(piece_scores, dtype=np.float64)[self.piece_of])
        return best

    def lexical(self, question_terms, view=None):
        scores, bound = self.outer.lexical(question_terms)
        if self.share == 0:
            return scores, bound
        inner, inner_bound = self.inner.lexical(question_terms)
        own = np.asarray(scores, dtype=np.float64) / bound if bound > 0 else np.zeros(self.size)
        best = self._best(np.asarray(inner) / inner_bound) if inner_bound > 0 else np.zeros(self.size)
        if self.entries is not None:
            return np.maximum(own, self.share * best), 1.0
        return (1 - self.share) * own + self.share * best, 1.0

    def row_cosines(self, vector, rows=None, view=None):
        own = self.outer.row_cosines(vector)
        if self.share and self.entries is not None:
            own = np.maximum(own, self.share * self._best(self.inner.row_cosines(vector)))
        elif self.share:
            own = (1 - self.share) * own + self.share * self._best(self.inner.row_cosines(vector))
        own = own.astype(np.float32)
        return own if rows is None else own[rows]


def edge_span(look: int, backward: bool):
    """`stitch._section_span`, then, when the run holds its section's edge and the hit is that edge's
    piece, up to ``look`` characters of the neighbouring section's readable pieces on that side."""
    from collections_app.text import stitch

    plain = stitch._section_span

    def span(ordinal, readable, bound):
        first, last = plain(ordinal, readable, bound)
        row = readable[ordinal]
        sides = [(last, 1)] + ([(first, -1)] if backward else [])
        for edge, step in sides:
            if edge != ordinal:
                continue
            taken, at = 0, edge + step
            while (
                (nxt := readable.get(at)) is not None
                and nxt.document == row.document
                and taken + len(nxt.text) <= look
            ):
                taken += len(nxt.text)
                at += step
            if step == 1:
                last = at - 1
            else:
                first = at + 1
        return first, last

    return span


def whole_sections(limit: int) -> None:
    """Structure keeps a section of at most ``limit`` characters as one piece (0: as it is)."""
    from collections_app.text import chunking

    plain = getattr(chunking, "_plain_pack", chunking._pack_section)
    chunking._plain_pack = plain

    def pack(text, units, size, overlap):
        if units and limit and units[-1][1] - units[0][0] <= limit:
            return [(units[0][0], units[-1][1])]
        return plain(text, units, size, overlap)

    chunking._pack_section = pack


def entry_spans(documents, marked: bool = False) -> dict[int, list[tuple[int, int]]]:
    """Each document's list entries and table rows, as the parent strategy finds them; ``marked``: only
    those whose first line is a list item, an option or a table row (not a term over deeper lines,
    which unfenced code also is)."""
    from collections_app.text.headings import Outline
    from collections_app.text.parent import _LIST_ITEM, _TABLE_ROW, _items
    from collections_app.text.sections import section_units, sections

    out = {}
    for number, text in enumerate(documents):
        outline = Outline(text)
        out[number] = [
            (a, b)
            for start, end in sections(text, outline)
            for a, b, _entry, prose in _items(text, section_units(text, outline, start, end))
            if not prose
            and (
                not marked
                or _LIST_ITEM.match(text, a)
                or _TABLE_ROW.match(text, a)
                or _TABLE_ROW.match(text, text.rfind("\n", 0, b) + 1)
            )
        ]
    return out


def whole_documents(limit: int) -> None:
    """Structure keeps a document of at most ``limit`` characters as one piece (0: as it is)."""
    from collections_app.text import chunking
    from collections_app.text.headings import trim

    plain = chunking._structure

    def cut(text, size, overlap):
        start, end = trim(text, 0, len(text))
        if limit and 0 < end - start <= limit:
            return [(start, end)]
        return plain(text, size, overlap)

    chunking._structure = cut


def build(documents, names, cache, share_specs, entries=False):

    (structure, _), (parent, _) = variants(["structure:", "parent:"])
    started = time.perf_counter()
    outer = scratch(documents, structure, cache, names)
    inner = scratch(documents, parent, cache, names)
    print(
        f"# built in {time.perf_counter() - started:.1f}s: {len(outer.rows)} paragraphs, "
        f"{len(inner.rows)} pieces",
        flush=True,
    )
    spans = entry_spans(documents, entries == "marked") if entries else None
    return structure, [(share, Blend(outer, inner, share, spans)) for share in share_specs]


def dev(args, cache) -> None:
    from collections_app import measure as m

    folder, documents, names, questions, controls, asked = dev_set(args, cache)
    print(
        f"# {folder.name}: {len(questions)} questions, {len(controls)} controls, {len(documents)} documents"
    )
    structure, blends = build(documents, names, cache, args.shares, args.entries)
    print("| share | floor | found@1 | found@5 | controls empty | answer words median / p95 |")
    print("|---|---|---|---|---|---|")
    for share, index in blends:
        for floor in args.floors:
            at1 = at5 = 0
            words = []
            for number, question in enumerate(questions):
                vector = asked[number] if asked is not None else None
                runs = ask(index, question.text, vector, structure, None, most=5, floor=floor)
                words.append(sum(len(run.text.split()) for run in runs))
                at5 += m.find_answer(runs, question.answer)["found"]
                alone = ask(index, question.text, vector, structure, None, most=1, floor=floor)
                at1 += m.find_answer(alone, question.answer)["found"]
            empty = sum(
                not ask(
                    index,
                    text,
                    asked[len(questions) + n] if asked is not None else None,
                    structure,
                    None,
                    most=1,
                    floor=floor,
                )
                for n, text in enumerate(controls)
            )
            print(
                f"| {share} | {floor} | {at1}/{len(questions)} | {at5}/{len(questions)} | "
                f"{empty}/{len(controls)} | {statistics.median(words):.0f} / {p95(words)} |",
                flush=True,
            )


def edge(args, cache) -> None:
    """Parent 400 §3,000 with a look into the next (and previous) section when the hit is at the edge."""
    from collections_app import measure as m
    from collections_app.text import stitch

    folder, documents, names, questions, _controls, asked = dev_set(args, cache)
    ((parent, bound),) = variants(["parent::3000"])
    index = scratch(documents, parent, cache, names)
    plain = stitch._section_span
    print(f"# {folder.name}: {len(questions)} questions")
    print("| look | backward | found@1 | found@5 | answer words median / p95 |")
    print("|---|---|---|---|---|")
    for look in args.looks:
        for backward in (False, True):
            stitch._section_span = edge_span(look, backward) if look else plain
            at1 = at5 = 0
            words = []
            for number, question in enumerate(questions):
                runs = ask(index, question.text, asked[number], parent, bound, most=5, floor=0.22)
                words.append(sum(len(run.text.split()) for run in runs))
                at5 += m.find_answer(runs, question.answer)["found"]
                alone = ask(index, question.text, asked[number], parent, bound, most=1, floor=0.22)
                at1 += m.find_answer(alone, question.answer)["found"]
            print(
                f"| {look} | {backward} | {at1}/{len(questions)} | {at5}/{len(questions)} | "
                f"{statistics.median(words):.0f} / {p95(words)} |",
                flush=True,
            )
            if not look:
                break
    stitch._section_span = plain


def scifact(args, cache) -> None:
    from collections_app import measure as m
    from collections_app.metrics import ndcg_at_k, recall_at_k
    from ragsite.fusion import FUSION_WEIGHT

    ids, documents, items, qrels = scifact_set(args)
    asked = cache.vectors([text for _qid, text in items])
    print(
        f"# SciFact {args.split}: {len(items)} queries, {len(documents)} documents, "
        f"{'hybrid' if asked is not None else 'lexical'}"
    )
    _structure, blends = build(documents, [f"{d}.txt" for d in ids], cache, args.shares, args.entries)
    print("| share | nDCG@10 | recall@100 |")
    print("|---|---|---|")
    for share, index in blends:
        ndcg = recall = 0.0
        for number, (qid, text) in enumerate(items):
            vector = asked[number] if asked is not None else None
            runs = m.rank(index, text, vector, weight=FUSION_WEIGHT, most=100, around=0, floor=0.0)
            ranked = list(dict.fromkeys(ids[run.document] for run in runs))
            ndcg += ndcg_at_k(ranked, qrels[qid], k=10)
            recall += recall_at_k(ranked, set(qrels[qid]), k=100)
        print(f"| {share} | {ndcg / len(items):.4f} | {recall / len(items):.4f} |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("set", choices=["dev", "scifact", "edge"])
    parser.add_argument("--shares", type=float, nargs="+", default=[0.0, 0.3, 0.5])
    parser.add_argument(
        "--entries",
        nargs="?",
        const="all",
        choices=["all", "marked"],
        help="max with list-entry pieces only (marked: items, options and rows)",
    )
    parser.add_argument("--whole", type=int, default=0, help="structure: a section this short stays whole")
    parser.add_argument(
        "--whole-documents", type=int, default=0, help="structure: a document this short stays whole"
    )
    parser.add_argument("--looks", type=int, nargs="+", default=[0, 800, 1600])
    parser.add_argument("--floors", type=float, nargs="+", default=[0.22])
    set_options(parser)
    args = parser.parse_args()
    cache = vector_cache(args, "precision")
    whole_sections(args.whole)
    whole_documents(args.whole_documents)
    started = time.perf_counter()
    {"dev": dev, "scifact": scifact, "edge": edge}[args.set](args, cache)
    print(f"# {time.perf_counter() - started:.0f}s, {cache.embedded} texts embedded", file=sys.stderr)


if __name__ == "__main__":
    main()
