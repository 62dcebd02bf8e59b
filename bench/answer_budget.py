"""Answer size and found@5 on the dev set, with and without the answer budget (max_chars).

    python bench/answer_budget.py

The dev set's corpus (bench/known_answers) built with the defaults (structure, AROUND); each question
asked at the default floor, most=5, once with a budget that never binds (100,000 characters: the
answers as before the budget) and once at ANSWER_MAX_CHARS (6,000). Reported: found@5 (the marker in one
of the five paragraphs), and the answer's size in words (all its paragraphs), median and 95th percentile.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness  # noqa: E402


def main() -> None:
    harness.setup("ocr")
    from collections_app.services.search import search_collection

    questions, _controls = harness.load_items()
    agent, collection = harness.built_collection("ocr-0", harness.KNOWN_ANSWERS / "corpus")
    print(f"# {len(questions)} questions; machine shared (2 cores)")
    print("| max_chars | found@5 | words: median | words: p95 | answers cut |")
    print("|---|---|---|---|---|")
    for budget in (100_000, 10_000, 6_000):
        found, sizes, cut = 0, [], 0
        for item in questions:
            answer = search_collection(
                agent=agent, collection=collection, question=item["question"], most=5, max_chars=budget
            )
            found += bool(harness.found_rank(answer["paragraphs"], item["answer"]))
            sizes.append(sum(len(p["text"].split()) for p in answer["paragraphs"]))
            cut += answer["cut"]
        p95 = statistics.quantiles(sizes, n=20)[-1]
        print(
            f"| {budget:,} | {found / len(questions):.3f} | {statistics.median(sizes):.0f} "
            f"| {p95:.0f} | {cut} |"
        )


if __name__ == "__main__":
    main()
