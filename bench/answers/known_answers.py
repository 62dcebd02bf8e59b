"""The known-answers dev set: paraphrased questions over long public documents, answers found or not.

    python bench/answers/known_answers.py                  # per mode: default settings, and unfloored
    python bench/answers/known_answers.py --measure        # also through `measure`, each chunking strategy
    python bench/answers/known_answers.py --known-answers  # also as the collection's known-answers check
    python bench/answers/known_answers.py --json out.json  # every outcome there, not bench/results/
    python bench/answers/known_answers.py --corpus data/bench/man-shelf \
        --questions bench/answers/man_shelf/questions.jsonl   # the man shelf (tools/man_shelf.py renders it)

The corpus is ``bench/answers/dev_set/corpus/`` (twelve chapters of the Python, PostgreSQL and SQLite
manuals; SOURCES.md says where each comes from and under which licence) and the questions are
``bench/answers/dev_set/questions.jsonl`` in the shape `manage.py measure` reads: a user's wording,
with the answer marked by a verbatim substring of the document, plus controls that the documents
do not answer.

The collection is built by `build_collection` (structure chunking, the collection defaults) with
the configured embedder, and every question is asked through `search_collection` as an agent
would: at the default floor and around (``MIN_SCORE``, ``AROUND``), 10 deep, and again unfloored.
A question is found at k when its marker is inside one of the first k paragraphs returned (after
stitching, compared as `measure` compares). A control is empty when nothing comes back.

``--measure`` runs the same questions through `measure_collection` (in batches within its limit
of 50 questions), each available chunking strategy at its default size, around 0 and 1,
unfloored and at the default floor (``--measure-methods`` narrows the strategies).

``--known-answers`` gives the collection the questions and controls as its known answers and measures its
live build as the check after every build does (`measure_build`: found@1 and found@5, at the floor in
force, the default one).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import harness, results  # noqa: E402

NAME = "known-answers"
DEPTHS = (1, 5, 10)


def evaluate(
    agent, collection, questions, controls, *, mode: str, floor: float | None, max_chars=None, each=False
) -> dict:
    """found@1/5/10 over the answerable questions and the share of controls left empty. ``each``: found@k
    in an answer asked for k paragraphs (as an agent asking for k gets), not in the first k of 10."""
    if each:
        held = {}
        for k in DEPTHS:
            answers = [
                harness.ask(
                    agent, collection, i["question"], mode=mode, most=k, min_score=floor, max_chars=max_chars
                )
                for i in questions
            ]
            held[k] = [
                harness.found_rank(a, i["answer"], i.get("document")) is not None
                for a, i in zip(answers, questions, strict=True)
            ]
        return {
            "mode": mode,
            "floor": floor,
            "found": {k: sum(held[k]) / len(questions) for k in DEPTHS},
            "controls_empty": None,
            "questions": [
                {"question": item["question"], **{f"found_{k}": held[k][n] for k in DEPTHS}}
                for n, item in enumerate(questions)
            ],
            "controls": [],
        }
    outcomes = []
    for item in questions:
        paragraphs = harness.ask(
            agent, collection, item["question"], mode=mode, most=max(DEPTHS), min_score=floor
        )
        rank = harness.found_rank(paragraphs, item["answer"], item.get("document"))
        score = paragraphs[rank - 1]["score"] if rank else None
        # Found at 1: the answer of one paragraph holds the marker (issue 28, item 4), not rank 1 of a
        # deeper answer, whose first paragraph may have a lower hit merged into it.
        alone = harness.ask(agent, collection, item["question"], mode=mode, most=1, min_score=floor)
        first = rank == 1 and harness.found_rank(alone, item["answer"], item.get("document")) == 1
        outcomes.append({"question": item["question"], "rank": rank, "score": score, "at_1": first})
    empty = []
    for question in controls:
        paragraphs = harness.ask(agent, collection, question, mode=mode, most=1, min_score=floor)
        empty.append(
            {
                "question": question,
                "empty": not paragraphs,
                "top_score": paragraphs[0]["score"] if paragraphs else None,
            }
        )
    found = {k: sum(1 for o in outcomes if o["rank"] and o["rank"] <= k) / len(outcomes) for k in DEPTHS}
    found[1] = sum(1 for o in outcomes if o["at_1"]) / len(outcomes)
    return {
        "mode": mode,
        "floor": floor,
        "found": found,
        "controls_empty": sum(c["empty"] for c in empty) / len(empty) if empty else None,
        "questions": outcomes,
        "controls": empty,
    }


def known_answers(collection, questions, controls) -> dict:
    """found@1 and found@5 and the controls left empty, as the collection's known-answers check reports its
    live build (`measure_build`, at the floor in force)."""
    from collections_app.services.known_answers import live_build_id, measure_build, set_known_answers

    items = [*questions, *({"question": control, "control": True} for control in controls)]
    set_known_answers(collection=collection, items=items, floor_measured=False)
    report = measure_build(build_id=live_build_id(collection))
    empty = [not r["returned"] for r in report.results if r["control"]]
    return {
        "found": {1: report.found_at_1 / report.answers, 5: report.found_at_5 / report.answers},
        "controls_empty": sum(empty) / len(empty) if empty else None,
        "floor": report.floor,
        "questions": [r for r in report.results if not r["control"]],
    }


def measure(collection, questions, controls, *, floor: float | None, methods=None) -> list[dict]:
    """found@1/5/10 per chunking strategy (default size; ``methods``, default all) and around, through
    `measure_collection`."""
    from collections_app.services.measure import MAX_QUESTIONS, measure_collection
    from collections_app.text.chunking import AVAILABLE

    chosen = methods or AVAILABLE
    variants = [{"method": method, "around": around} for method in chosen for around in (0, 1)]
    # Within measure's limit of questions per run: answerable questions and controls shared out evenly.
    batches = max(1, -(-(len(questions) + len(controls)) // MAX_QUESTIONS))
    rows: dict[tuple, dict] = {}
    for batch in range(batches):
        report = measure_collection(
            collection=collection,
            questions=questions[batch::batches],
            controls=controls[batch::batches],
            variants=variants,
            most=max(DEPTHS),
            min_score=floor,
        )
        for variant in report["variants"]:
            key = (variant["method"], variant["size"], variant["around"])
            row = rows.setdefault(
                key,
                {
                    "method": variant["method"],
                    "size": variant["size"],
                    "around": variant["around"],
                    "paragraphs": variant["paragraphs"],
                    "ranks": [],
                    "at_1": [],
                    "controls": [],
                },
            )
            row["ranks"].extend(q["rank"] for q in variant["questions"])
            row["at_1"].extend(q["found_at_1"] for q in variant["questions"])
            row["controls"].extend(c["returned"] == 0 for c in variant["controls"])
    table = []
    for row in rows.values():
        ranks = row.pop("ranks")
        empties = row.pop("controls")
        row["found"] = {k: sum(1 for r in ranks if r and r <= k) / len(ranks) for k in DEPTHS}
        row["found"][1] = sum(row.pop("at_1")) / len(ranks)
        row["controls_empty"] = sum(empties) / len(empties) if empties else None
        row["floor"] = floor
        table.append(row)
    return table


def percent(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f} %"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--measure", action="store_true", help="also through measure, per chunking strategy")
    parser.add_argument("--measure-methods", nargs="+", default=None, help="measure only these strategies")
    parser.add_argument(
        "--known-answers", action="store_true", help="also as the collection's known-answers check"
    )
    parser.add_argument("--modes", nargs="+", choices=harness.MODES, default=list(harness.MODES))
    parser.add_argument(
        "--context-weight",
        type=float,
        default=None,
        help="the lexical weight of a paragraph's title and section (CONTEXT_WEIGHT)",
    )
    parser.add_argument(
        "--no-context", action="store_true", help="index paragraphs without title and section"
    )
    parser.add_argument(
        "--each", action="store_true", help="found@k in an answer asked for k paragraphs (default floor only)"
    )
    parser.add_argument(
        "--max-chars", type=int, default=None, help="the answer budget (default ANSWER_MAX_CHARS)"
    )
    parser.add_argument(
        "--corpus", type=Path, default=harness.KNOWN_ANSWERS / "corpus", help="the folder of documents"
    )
    parser.add_argument(
        "--questions", type=Path, default=harness.KNOWN_ANSWERS / "questions.jsonl", help="their questions"
    )
    parser.add_argument(
        "--analyzer", default="simple", help="the collection's analyzer (ragsite.analyzers: simple, english)"
    )
    parser.add_argument(
        "--weight", type=float, default=None, help="the hybrid cosine weight (ragsite.fusion.FUSION_WEIGHT)"
    )
    parser.add_argument(
        "--entry-share",
        type=float,
        default=None,
        help="with ENTRIES=1: the share of a best entry's lift that counts (ranking.ENTRY_SHARE)",
    )
    parser.add_argument(
        "--sharing",
        choices=("by run", "outward", "by hit", "best first", "even"),
        default=None,
        help="how the answer budget grows hits and neighbours after every hit's least part "
        "(collections_app.text.budget.SHARING)",
    )
    parser.add_argument(
        "--json", type=Path, help="write every outcome here (default: bench/results/answers[-<corpus>].json)"
    )
    args = parser.parse_args()

    harness.setup("known-answers", context=not args.no_context)
    from collections_app.conf import settings

    if args.weight is not None:
        from ragsite import fusion

        fusion.FUSION_WEIGHT = args.weight
    if args.entry_share is not None:
        from collections_app import ranking

        ranking.ENTRY_SHARE = args.entry_share
    if args.sharing is not None:
        from collections_app.text import budget

        budget.SHARING = args.sharing
    if args.context_weight is not None:
        from collections_app.text import context

        context.CONTEXT_WEIGHT = args.context_weight
    questions, controls = harness.load_items(args.questions)
    dev_set = args.corpus.resolve() == (harness.KNOWN_ANSWERS / "corpus").resolve()
    suffix = "" if dev_set else f"-{args.corpus.resolve().name}"
    agent, collection = harness.built_collection(NAME + suffix, args.corpus, analyzer=args.analyzer)
    default_floor = float(settings.MIN_SCORE)
    print(
        f"# {len(questions)} questions, {len(controls)} controls; default floor {default_floor}, "
        f"around {settings.AROUND}, analyzer {args.analyzer}",
        file=sys.stderr,
    )

    outcomes = []
    print("| mode | floor | found@1 | found@5 | found@10 | controls empty |")
    print("|---|---|---|---|---|---|")
    for mode in args.modes:
        for floor in (None,) if args.each else (None, 0.0):
            result = evaluate(
                agent,
                collection,
                questions,
                controls,
                mode=mode,
                floor=floor,
                max_chars=args.max_chars,
                each=args.each,
            )
            outcomes.append(result)
            shown = f"{default_floor} (default)" if floor is None else "0 (unfloored)"
            print(
                f"| {mode} | {shown} | {percent(result['found'][1])} | {percent(result['found'][5])} | "
                f"{percent(result['found'][10])} | {percent(result['controls_empty'])} |",
                flush=True,
            )

    table = []
    if args.measure:
        print(
            "\n| measure: method (size) | around | paragraphs | floor | found@1 | found@5 | found@10 | "
            "controls empty |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for floor in (None, default_floor):
            for row in measure(collection, questions, controls, floor=floor, methods=args.measure_methods):
                table.append(row)
                print(
                    f"| {row['method']} ({row['size']}) | {row['around']} | {row['paragraphs']} | "
                    f"{floor or 0} | {percent(row['found'][1])} | {percent(row['found'][5])} | "
                    f"{percent(row['found'][10])} | {percent(row['controls_empty'])} |",
                    flush=True,
                )
    checked = None
    if args.known_answers:
        checked = known_answers(collection, questions, controls)
        print("\n| known answers | floor | found@1 | found@5 | controls empty |")
        print("|---|---|---|---|---|")
        print(
            f"| live build | {checked['floor']} | {percent(checked['found'][1])} | "
            f"{percent(checked['found'][5])} | {percent(checked['controls_empty'])} |",
            flush=True,
        )
    figures = {"corpus": args.corpus.name, "questions": len(questions), "controls": len(controls)}
    figures["analyzer"] = args.analyzer
    figures["sharing"] = args.sharing or "default"
    figures.update(default_floor=default_floor, search=outcomes, measure=table, known_answers=checked)
    figures["entries"] = bool(settings.ENTRIES)
    print("# written to", results.save("answers" + suffix, figures, args.json), file=sys.stderr)


if __name__ == "__main__":
    main()
