"""Where the floor should be: the score of each answer against the best score of each control.

    python bench/answers/floor.py                      # the three public sets, a table and docs/img/floor.svg
    python bench/answers/floor.py --sets known-answers handbook
    python bench/answers/floor.py --floor 0.2          # draw and report this floor, not the configured one
    python bench/answers/floor.py --fusion-weight 0.48 --svg out.svg     # the bands under another fused scale

For every set and every answerable question, the score of the best paragraph that holds the
answer (asked through `search_collection` in the collection's default mode, unfloored, around 0,
every paragraph ranked); for every control question, the best score of any paragraph. A floor
keeps an answer when the answer's paragraph scores at or above it, and leaves a control empty when
its best paragraph scores below it.

The sets:

* ``known-answers``: the dev set of bench/answers/dev_set/ (69 questions, 20 controls);
* ``handbook``: the bundled sample documents with bench/answers/floor_sets/handbook.jsonl (14 questions,
  among them the lost laptop and the first day, and 10 controls, among them the capital of France);
* ``scifact``: SciFact's **train** claims (the floor is chosen without the test split), the answer
  being the best-scoring abstract judged relevant; the controls are the questions of the two other
  sets, which ask about software and an employee handbook, not biomedicine (113 of them).

Prints, per set, the share of answers kept and of controls left empty at each floor from 0.10 to
0.40 and the band of floors that keep ≥ 95 % of the answers and leave ≥ 90 % of the controls empty
(issue 12's dev-set targets), or by how much the two overlap when none does; and writes
docs/img/floor.svg: the two histograms per set with the floor as a line. ``--fusion-weight`` sets
the cosine's weight in the fused score for the run, to see whether another scale opens a band.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import harness, results  # noqa: E402

SETS = ("known-answers", "handbook", "scifact")
SVG = harness.ROOT / "docs" / "img" / "floor.svg"


def scifact_items(dataset: Path, split: str = "train") -> tuple[list[dict], Path]:
    """SciFact's claims of ``split`` with their relevant abstracts, and the folder of one file per
    abstract."""
    from bench.beir.beir import load

    corpus, queries, qrels = load(dataset, split)
    folder = harness.ROOT / "data" / "bench" / "scifact-docs"  # shared with bench/beir/beir.py
    if not folder.exists() or len(list(folder.iterdir())) != len(corpus):
        folder.mkdir(parents=True, exist_ok=True)
        for doc_id, (title, text) in corpus.items():
            (folder / f"{doc_id}.txt").write_text(f"{title}\n\n{text}".strip() + "\n", encoding="utf-8")
    return [
        {"question": queries[q], "documents": {f"{d}.txt" for d in docs}} for q, docs in qrels.items()
    ], folder


def answer_scores(agent, collection, questions: list[dict], depth: int | None = None) -> list[float | None]:
    """Per question, the score of its best answer paragraph (None when no paragraph holds the answer)."""
    from collections_app.services.search import search_collection

    scores = []
    for item in questions:
        if "answer" in item:
            scores.append(
                harness.rank_all(agent, collection, item["question"]).best_holding(item["answer"])[1]
            )
            continue
        answer = search_collection(
            agent=agent,
            collection=collection,
            question=item["question"],
            most=depth,
            around=0,
            min_score=0.0,
            max_most=depth,
        )
        hits = [p["score"] for p in answer["paragraphs"] if p["document"] in item["documents"]]
        # Not in the top `depth`: below the last score returned, which is all a floor needs to know.
        scores.append(hits[0] if hits else 0.0)
    return scores


def control_scores(agent, collection, controls: list[str]) -> list[float]:
    from collections_app.services.search import search_collection

    tops = []
    for question in controls:
        answer = search_collection(
            agent=agent, collection=collection, question=question, most=1, around=0, min_score=0.0
        )
        tops.append(answer["paragraphs"][0]["score"] if answer["paragraphs"] else 0.0)
    return tops


def kept(answers: list[float | None], floor: float) -> float:
    return sum(1 for s in answers if s is not None and s >= floor) / len(answers)


def empty(controls: list[float], floor: float) -> float:
    return sum(1 for s in controls if s < floor) / len(controls)


def band(
    answers: list[float | None], controls: list[float], *, keep: float = 0.95, stop: float = 0.90
) -> tuple[float, float]:
    """(above, at_most): every floor f with above < f <= at_most keeps at least ``keep`` of the answers
    and leaves at least ``stop`` of the controls empty; above >= at_most means no floor does, by the
    overlap above - at_most (issue 12's dev-set targets are the defaults)."""
    if not answers or not controls or not (0 <= keep <= 1 and 0 <= stop <= 1):
        raise ValueError("a band needs answers, controls and shares from 0 to 1")
    scores = sorted(s or 0.0 for s in answers)
    tops = sorted(controls, reverse=True)
    # How many may fall on the wrong side; the epsilon keeps 20 × (1 − 0.9) from flooring to 1.
    may_lose = math.floor(len(scores) * (1 - keep) + 1e-9)
    may_pass = math.floor(len(tops) * (1 - stop) + 1e-9)
    at_most = scores[may_lose] if may_lose < len(scores) else math.inf
    above = tops[may_pass] if may_pass < len(tops) else -math.inf
    return above, at_most


def histogram_svg(sets: dict[str, dict], floor: float, path: Path) -> None:
    """One panel per set: answers (blue, up) and controls (orange, down) in bins of 0.02, the floor in red."""
    width, panel, left, top = 720, 190, 48, 28
    bins = 50
    height = top + panel * len(sets) + 30
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="16" font-size="13">Best answer paragraph (blue, up) and best control paragraph '
        f"(orange, down) per question; floor {floor:.2f} in red</text>",
    ]
    plot_width = width - left - 20
    for number, (name, data) in enumerate(sets.items()):
        y0 = top + number * panel + panel / 2
        counts_a = [0] * bins
        counts_c = [0] * bins
        for s in data["answers"]:
            counts_a[min(bins - 1, int((s or 0.0) * bins))] += 1
        for s in data["controls"]:
            counts_c[min(bins - 1, int(s * bins))] += 1
        # Shares, not counts, so a set of 800 questions and one of 14 read on the same scale.
        share_a = [c / max(1, len(data["answers"])) for c in counts_a]
        share_c = [c / max(1, len(data["controls"])) for c in counts_c]
        scale = (panel / 2 - 18) / max(max(share_a), max(share_c), 1e-9)
        bar = plot_width / bins
        for i in range(bins):
            x = left + i * bar
            if share_a[i]:
                h = share_a[i] * scale
                out.append(
                    f'<rect x="{x:.1f}" y="{y0 - h:.1f}" width="{bar - 1:.1f}" height="{h:.1f}" '
                    'fill="#3b75af"/>'
                )
            if share_c[i]:
                h = share_c[i] * scale
                out.append(
                    f'<rect x="{x:.1f}" y="{y0:.1f}" width="{bar - 1:.1f}" height="{h:.1f}" fill="#ef8636"/>'
                )
        out.append(f'<line x1="{left}" x2="{left + plot_width}" y1="{y0}" y2="{y0}" stroke="#444"/>')
        fx = left + floor * plot_width
        out.append(
            f'<line x1="{fx:.1f}" x2="{fx:.1f}" y1="{y0 - panel / 2 + 32}" y2="{y0 + panel / 2 - 4}" '
            f'stroke="#c00" stroke-width="2"/>'
        )
        out.append(
            f'<text x="{left}" y="{y0 - panel / 2 + 24}" font-weight="bold">{name}: '
            f"{len(data['answers'])} answers, {len(data['controls'])} controls — kept "
            f"{100 * kept(data['answers'], floor):.0f} %, controls empty "
            f"{100 * empty(data['controls'], floor):.0f} %</text>"
        )
    axis = top + panel * len(sets) + 4
    for tick in range(0, 11):
        x = left + tick / 10 * plot_width
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{axis}" y2="{axis + 5}" stroke="#444"/>')
        out.append(f'<text x="{x:.1f}" y="{axis + 17}" text-anchor="middle">{tick / 10:.1f}</text>')
    out.append("</svg>")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--scifact", type=Path, default=harness.SCIFACT, help="the SciFact dataset folder")
    parser.add_argument("--floor", type=float, default=None, help="the floor to report and draw")
    parser.add_argument("--svg", type=Path, default=SVG)
    parser.add_argument(
        "--fusion-weight",
        type=float,
        default=None,
        help="the cosine's weight in the fused score (ragsite.fusion.FUSION_WEIGHT), "
        "to see how the bands move",
    )
    parser.add_argument(
        "--no-context", action="store_true", help="index paragraphs without title and section"
    )
    parser.add_argument(
        "--json", type=Path, help="write every score here (default: bench/results/floor.json)"
    )
    parser.add_argument(
        "--replot", type=Path, help="draw the SVG from a --json file of an earlier run, and stop"
    )
    args = parser.parse_args()
    if args.replot:
        if args.floor is None:
            parser.error("--replot needs --floor")
        saved = json.loads(args.replot.read_text())
        histogram_svg(saved.get("sets", saved), args.floor, args.svg)
        return

    harness.setup("floor", context=not args.no_context)
    from collections_app.conf import settings

    if args.fusion_weight is not None:
        if not 0 <= args.fusion_weight <= 1:
            parser.error("--fusion-weight is a number from 0 to 1")
        from ragsite import fusion

        fusion.FUSION_WEIGHT = args.fusion_weight

    floor = float(settings.MIN_SCORE) if args.floor is None else args.floor
    dev_questions, dev_controls = harness.load_items()
    hb_questions, hb_controls = harness.load_items(
        harness.ROOT / "bench" / "answers" / "floor_sets" / "handbook.jsonl"
    )
    sets: dict[str, dict] = {}
    for name in args.sets:
        if name == "known-answers":
            agent, collection = harness.built_collection(name, harness.KNOWN_ANSWERS / "corpus")
            questions, controls = dev_questions, dev_controls
        elif name == "handbook":
            agent, collection = harness.built_collection(name, harness.SAMPLE_DOCS)
            questions, controls = hb_questions, hb_controls
        else:
            questions, folder = scifact_items(args.scifact)
            agent, collection = harness.built_collection(name, folder, size=100_000, overlap=0)
            controls = [q["question"] for q in dev_questions + hb_questions] + dev_controls + hb_controls
        sets[name] = {
            "answers": answer_scores(agent, collection, questions, depth=100),
            "controls": control_scores(agent, collection, controls),
        }
        print(f"# {name}: {len(questions)} answers, {len(controls)} controls", file=sys.stderr, flush=True)

    print("| floor | " + " | ".join(f"{n} answers kept | {n} controls empty" for n in sets) + " |")
    print("|---" * (1 + 2 * len(sets)) + "|")
    for step in range(10, 41):
        f = step / 100
        cells = " | ".join(
            f"{100 * kept(d['answers'], f):.1f} % | {100 * empty(d['controls'], f):.1f} %"
            for d in sets.values()
        )
        mark = " ←" if abs(f - floor) < 1e-9 else ""
        print(f"| {f:.2f}{mark} | {cells} |")
    for name, data in sets.items():
        found = sorted(s for s in data["answers"] if s is not None)
        missing = sum(1 for s in data["answers"] if s is None)
        print(
            f"# {name}: answers min {found[0]:.3f} median {found[len(found) // 2]:.3f}; controls max "
            f"{max(data['controls']):.3f} median {sorted(data['controls'])[len(data['controls']) // 2]:.3f}; "
            f"{missing} answers in no single paragraph",
            file=sys.stderr,
        )
        above, at_most = band(data["answers"], data["controls"])
        verdict = (
            f"floors above {above:.4f} and up to {at_most:.4f} meet both"
            if above < at_most
            else f"no floor meets both: the controls need one above {above:.4f}, the answers one at most "
            f"{at_most:.4f} (overlap {above - at_most:.4f})"
        )
        print(f"# {name}: ≥ 95 % of answers kept and ≥ 90 % of controls empty: {verdict}", file=sys.stderr)
    histogram_svg(sets, floor, args.svg)
    bands = {
        name: dict(zip(("above", "at_most"), band(d["answers"], d["controls"]), strict=True))
        for name, d in sets.items()
    }
    figures = {"floor": floor, "fusion_weight": args.fusion_weight, "bands": bands, "sets": sets}
    print("# written to", results.save("floor", figures, args.json), file=sys.stderr)


if __name__ == "__main__":
    main()
