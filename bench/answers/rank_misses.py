"""Where a known answer's paragraph ranks when it is not first, and what beats it.

    python bench/answers/rank_misses.py --corpus data/bench/licence-shelf \
        --questions bench/answers/licence_shelf/questions.jsonl
    python bench/answers/rank_misses.py --corpus data/bench/man-shelf \
        --questions bench/answers/man_shelf/questions.jsonl
    python bench/answers/rank_misses.py          # the dev set

Each answerable question is ranked over every row by the one ranking step (`ranking.rank`, hybrid, the
defaults' fusion weight, entries when the index has them), as a search ranks it before the floor, the
top k and the budget. For each question whose answer's paragraph (the first row holding the marker, of
the named document when the question names one) is not first, it prints that row's rank and its parts
(cosine, BM25 on [0, 1] with the context's share, the best entry's cosine and BM25, the fused score) beside
the first row's, and the kind of miss:

* ``same doc``: the first row is another paragraph of the right document;
* ``close doc``: a document whose name shares its first word with the right one (LGPL-2 for LGPL-2.1);
* ``other doc``: any other document;
* ``cut``: the row is first, yet an answer asked for one paragraph does not quote the marker (the budget
  shortened the hit to a part without it);
* ``neighbour``: the row is not first, yet an answer asked for one paragraph quotes it: it is the first
  row's neighbour, stitched to it (``around``).

The collection is the one `known_answers.py` builds for the same corpus (same store, same name).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path, PurePosixPath

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.answers.known_answers import NAME  # noqa: E402
from bench.common import harness  # noqa: E402


def parts(index, ranking, lexical_norm, cosine, row: int) -> str:
    """A row's cosine, normalised BM25, best entry's cosine and BM25, and fused score."""
    entries = ranking.entries
    entry = ""
    if entries is not None and entries.entry[row] >= 0:
        entry = f" entry cos {entries.cosine[row]:.3f} bm25 {entries.lexical[row]:.3f}"
    return f"cos {cosine[row]:.3f} bm25 {lexical_norm[row]:.3f}{entry} fused {ranking.scores[row]:.3f}"


def holds(paragraph, marker: str, document: str | None) -> bool:
    """Whether ``paragraph`` holds the normalised ``marker``, in ``document`` when one is named."""
    from collections_app.measure import normalise

    if document is not None and PurePosixPath(paragraph.document.name).stem != document:
        return False
    return marker in normalise(paragraph.text)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--corpus", type=Path, default=harness.KNOWN_ANSWERS / "corpus")
    parser.add_argument("--questions", type=Path, default=harness.KNOWN_ANSWERS / "questions.jsonl")
    parser.add_argument("--all", action="store_true", help="print found questions too")
    args = parser.parse_args()

    harness.setup("known-answers")
    import numpy as np

    from collections_app.measure import normalise
    from collections_app.models import Paragraph
    from collections_app.ranking import rank
    from collections_app.services.search.model_steps import question_vector
    from collections_app.services.search.plan import plan_search
    from ragsite import fusion
    from ragsite.fusion import normalise_bm25

    questions, _controls = harness.load_items(args.questions)
    dev_set = args.corpus.resolve() == (harness.KNOWN_ANSWERS / "corpus").resolve()
    suffix = "" if dev_set else f"-{args.corpus.resolve().name}"
    agent, collection = harness.built_collection(NAME + suffix, args.corpus)

    rows = None
    kinds: dict[str, int] = {}
    first_ranks = []
    for item in questions:
        plan = plan_search(
            agent=agent,
            collection=collection,
            question=item["question"],
            reader=None,
            on_behalf_of=None,
            most=10,
            around=None,
            min_score=None,
            key=None,
            mode=None,
            max_most=10,
            nprobe=None,
            explain=False,
        )
        index = plan.index
        if rows is None:
            by_pk = Paragraph.objects.select_related("document").in_bulk(
                [int(pk) for pk in index.row_paragraph]
            )
            rows = [by_pk[int(pk)] for pk in index.row_paragraph]
        vector = question_vector(plan).vector
        ranking = rank(
            index, plan.question_terms, vector, weight=fusion.FUSION_WEIGHT, most=index.size, floor=0.0
        )
        order = np.asarray(ranking.top)
        scores, upper = index.lexical(plan.question_terms)
        lexical_norm = normalise_bm25(scores, upper or 0.0)
        cosine = index.row_cosines(vector)
        marker, document = normalise(item["answer"]), item.get("document")

        right = next((int(r) for r in order if holds(rows[int(r)], marker, document)), None)
        place = None if right is None else int(np.flatnonzero(order == right)[0]) + 1
        first_ranks.append(place)
        top = int(order[0])
        alone = harness.ask(agent, collection, item["question"], most=1)
        quoted = harness.found_rank(alone, item["answer"], document) == 1
        if place == 1:
            kind = "found" if quoted else "cut"
        elif quoted:
            kind = "neighbour"
        elif right is None:
            kind = "absent"
        else:
            got = PurePosixPath(rows[top].document.name).stem
            want = PurePosixPath(rows[right].document.name).stem
            if got == want:
                kind = "same doc"
            elif got.split("-")[0].lower() == want.split("-")[0].lower():
                kind = "close doc"
            else:
                kind = "other doc"
        kinds[kind] = kinds.get(kind, 0) + 1
        if kind in ("found", "neighbour") and not args.all:
            continue
        print(f"\n[{kind}] rank {place}: {item['question']}")
        if right is not None:
            print(
                f"  right {rows[right].document.name}#{rows[right].index}: "
                f"{parts(index, ranking, lexical_norm, cosine, right)}"
            )
        if top != right:
            print(
                f"  first {rows[top].document.name}#{rows[top].index}: "
                f"{parts(index, ranking, lexical_norm, cosine, top)}"
            )
            print(f"    {' '.join(rows[top].text.split())[:160]}")
    print("\n# kinds:", ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    for k in (1, 2, 3, 5, 10):
        print(f"# ranked within {k}: {sum(1 for p in first_ranks if p and p <= k)} of {len(first_ranks)}")


if __name__ == "__main__":
    main()
