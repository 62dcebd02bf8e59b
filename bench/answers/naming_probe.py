"""Probe: a question's words that name a document (its title's words) weigh less in its vector. Measured,
not adopted (docs/benchmarks.md, *Found@1 misses on the shelves*).

    python bench/answers/naming_probe.py lic,man,dev 0.5 1

On the shelves the questions name their document ("which ls option…", "Under MPL 2.0…"), and a short
paragraph whose vector is mostly its title (a man page's NAME line, a licence's preamble) meets those
naming words best. This probe embeds the question a second time without the words that are words of some
document's title in the collection (less a few function words), and searches with the mix
``(1 - m) * whole + m * without`` (the dot products, and so each cosine, mixed the same way). Each ``m``
is asked at the defaults an agent meets, on the collections `known_answers.py` builds (same store).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.answers.passages_probe import SETS, wilson  # noqa: E402
from bench.common import harness  # noqa: E402

FUNCTION_WORDS = frozenset(
    "a an and are as at be by can do does for from how i in is it its may me must my of on or the this to "
    "what when which with you your".split()
)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("sets", help="comma-separated: lic, man, dev")
    parser.add_argument(
        "mixes", nargs="*", type=float, default=[0.5], help="the share m of the stripped question"
    )
    args = parser.parse_args()

    harness.setup("known-answers")
    import numpy as np

    import collections_app.services.search as search
    from bench.answers.known_answers import NAME, evaluate
    from collections_app.models import Paragraph
    from collections_app.services.search.model_steps import QuestionVector
    from ragsite import embedding
    from ragsite.analyzers import analyzer

    simple = analyzer("simple")
    whole = search.question_vector
    state = {"titles": frozenset(), "mix": 0.0}

    def stripped(question: str) -> str:
        def keep(match):
            words = simple.terms(match.group())
            naming = words and all(w in state["titles"] and w not in FUNCTION_WORDS for w in words)
            return "" if naming else match.group()

        return " ".join(re.sub(r"[\w.+-]+", keep, question).split())

    def question_vector(plan):
        asked = whole(plan)
        rest = stripped(plan.question)
        if not state["mix"] or asked.vector is None or rest == " ".join(plan.question.split()):
            return asked
        other = np.asarray(embedding.get_embedder().embed_with_usage([rest]).vectors[0], dtype=np.float32)
        mixed = (1 - state["mix"]) * asked.vector + state["mix"] * other
        return QuestionVector(mixed.astype(np.float32), asked.model)

    search.question_vector = question_vector
    print("| set | m | found@1 | found@5 | found@10 | controls empty |")
    print("|---|---|---|---|---|---|")
    for name in args.sets.split(","):
        corpus, questions_path = (ROOT / part for part in SETS[name])
        questions, controls = harness.load_items(questions_path)
        suffix = "" if name == "dev" else f"-{corpus.resolve().name}"
        agent, collection = harness.built_collection(NAME + suffix, corpus)
        contexts = Paragraph.objects.filter(collection=collection).values_list("context", flat=True)
        state["titles"] = frozenset(t for c in contexts for t in simple.terms(c.split(" › ")[0]))
        for mix in [0.0, *args.mixes]:
            state["mix"] = mix
            result = evaluate(agent, collection, questions, controls, mode="hybrid", floor=None)
            n = len(questions)
            found = {k: round(v * n) for k, v in result["found"].items()}
            cells = " | ".join(f"{found[k]} [{'–'.join(map(str, wilson(found[k], n)))}]" for k in (1, 5, 10))
            empty = sum(c["empty"] for c in result["controls"])
            print(f"| {name} ({n}) | {mix} | {cells} | {empty} of {len(controls)} |", flush=True)


if __name__ == "__main__":
    main()
