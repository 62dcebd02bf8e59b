"""Does a floor read off a collection's known answers hold for questions it has not seen? (issue 17)

    python bench/known_answers_floor.py ../shared/datasets/scifact [--documents 1500] [--answers 60]
                                        [--controls 20]

A SciFact collection is built through `build_collection` (the configured embedder, the local
all-MiniLM-L6-v2 by default; `structure` chunking, the default): the abstracts relevant to the
chosen claims plus random others, one file each. Claims with one relevant abstract are split, with a
fixed seed, into a *known* set and a *held-out* set of the same size; each claim's marker is the
opening of its abstract. Controls are claims whose abstracts were left out of the corpus: questions
on the corpus's own subject that it cannot answer, the hardest kind of control.

The known set is stored as the collection's known answers and measured by `measure_build`, as after
any build. The floor read off it (and, for comparison, the floors other MEASURED_FLOOR_KEEP values
give, and the fixed MIN_SCORE 0.25) is then applied to the held-out claims through
`search_collection`: how many held-out answers still come back in the top 5, and how many held-out
controls get nothing back. Prints one row per floor; nothing is timed. The scratch store lives
under data/bench/ and is reused: a second run embeds nothing.
"""

import argparse
import math
import os
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

SEED = 17
MARKER_CHARS = 60


def load(dataset: Path):
    from bench.beir import read_corpus, read_queries

    corpus, queries = read_corpus(dataset), read_queries(dataset)
    relevant: dict[str, set[str]] = {}
    for split in ("train", "test"):
        with open(dataset / "qrels" / f"{split}.tsv", encoding="utf-8") as handle:
            next(handle)
            for line in handle:
                qid, did, _score = line.rstrip("\n").split("\t")
                relevant.setdefault(qid, set()).add(did)
    return corpus, queries, relevant


def choose(corpus, queries, relevant, *, documents: int, answers: int, controls: int):
    """(known items, held-out items, the corpus's document ids), all drawn with one seeded generator."""
    rng = random.Random(SEED)
    single = sorted(
        q for q, docs in relevant.items() if len(docs) == 1 and len(corpus[next(iter(docs))][1]) > 200
    )
    rng.shuffle(single)
    answered, left_out = single[: 2 * answers], single[2 * answers : 2 * answers + 2 * controls]
    used = {next(iter(relevant[q])) for q in answered}
    excluded = {d for q in left_out for d in relevant[q]}
    if used & excluded:  # two claims sharing an abstract across the two roles: drop the control's claim
        left_out = [q for q in left_out if not relevant[q] & used]
        excluded = {d for q in left_out for d in relevant[q]}
    others = sorted(set(corpus) - used - excluded)
    rng.shuffle(others)
    ids = sorted(used | set(others[: max(0, documents - len(used))]))

    def item(q):
        doc = next(iter(relevant[q]))
        return {"question": queries[q], "answer": corpus[doc][1][:MARKER_CHARS].strip()}

    half = len(left_out) // 2
    known = [item(q) for q in answered[:answers]] + [
        {"question": queries[q], "control": True} for q in left_out[:half]
    ]
    held = [item(q) for q in answered[answers:]] + [
        {"question": queries[q], "control": True} for q in left_out[half:]
    ]
    return known, held, ids


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--documents", type=int, default=1500)
    parser.add_argument(
        "--answers", type=int, default=60, help="claims with an answer in each of the two sets"
    )
    parser.add_argument("--controls", type=int, default=20, help="controls in each of the two sets")
    parser.add_argument(
        "--swap", action="store_true", help="read the floor off the held-out set, test on the known"
    )
    args = parser.parse_args()

    name = "knownfloor"
    work = ROOT / "data" / "bench"
    work.mkdir(parents=True, exist_ok=True)
    backend = os.environ.setdefault("EMBED_BACKEND", "local")
    os.environ["DATABASE_URL"] = f"sqlite:///{work / f'{name}-{backend}-{args.documents}.sqlite3'}"
    folder = work / f"{name}-docs-{args.documents}"
    os.environ[f"KNOWLEDGE_{name.upper()}_FOLDER"] = str(folder)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")

    import django

    django.setup()
    from django.core.management import call_command

    from collections_app.measure import measured_floor, normalise
    from collections_app.models import Agent, Collection
    from collections_app.services import known_answers
    from collections_app.services.agents import create_agent, create_collection
    from collections_app.services.builds import build_collection
    from collections_app.services.search import search_collection

    call_command("migrate", verbosity=0)
    corpus, queries, relevant = load(args.dataset)
    known, held, ids = choose(
        corpus, queries, relevant, documents=args.documents, answers=args.answers, controls=args.controls
    )
    if args.swap:
        known, held = held, known
    if not folder.exists() or len(list(folder.iterdir())) != len(ids):
        folder.mkdir(exist_ok=True)
        for doc_id in ids:
            title, text = corpus[doc_id]
            (folder / f"{doc_id}.txt").write_text(f"{title}\n\n{text}".strip() + "\n", encoding="utf-8")
    agent = Agent.objects.filter(agent_id="bench").first() or create_agent(agent_id="bench")[0]
    collection = Collection.objects.filter(agent=agent, name=name).first() or create_collection(
        agent=agent, name=name, built_from="SciFact abstracts"
    )
    run = build_collection(collection=collection, requested_by="bench")
    if run.status != "succeeded":
        raise SystemExit(f"build {run.status}: {run.error}")
    known_answers.set_known_answers(collection=collection, items=known)
    report = known_answers.measure_build(build_id=run.pk)
    print(
        f"# {len(ids)} abstracts, {run.passages} paragraphs, model {run.model}; known set: "
        f"{report.found_at_5} of "
        f"{report.answers} found at 5 unfloored-or-default floor {report.floor}, lowest answer "
        f"{report.lowest_answer}, highest control {report.highest_control}, separate: {report.separates}",
        file=sys.stderr,
    )

    scores = [r["score"] for r in report.results if not r["control"] and r["score"] is not None]
    control_scores = [r["top_score"] or 0.0 for r in report.results if r["control"]]
    floors = [("fixed MIN_SCORE", 0.25), ("unfloored", 0.0)]
    for keep in (0.90, 0.95, 0.99):
        read = measured_floor(scores, control_scores, keep=keep)
        floors.append((f"measured, keep {keep:.2f} ({read['rule']})", read["floor"]))
        # For comparison, the floor keeping ⌈keep·n⌉ of the known answers themselves (the sample's quantile).
        ranked = sorted(scores, reverse=True)
        floors.append(
            (
                f"  sample quantile, keep {keep:.2f}",
                max(0.0, ranked[math.ceil(keep * len(ranked)) - 1] - 1e-6),
            )
        )

    def outcome(floor: float) -> tuple[int, int, int, int]:
        """(answers found, answers, controls with nothing back, controls) over the held-out set at `floor`."""
        found = silent = 0
        for item in held:
            answer = search_collection(
                agent=agent, collection=collection, question=item["question"], most=5, min_score=floor
            )
            if item.get("control"):
                silent += not answer["paragraphs"]
            else:
                wanted = normalise(item["answer"])
                found += any(wanted in normalise(p["text"]) for p in answer["paragraphs"])
        answers = sum(1 for item in held if not item.get("control"))
        return found, answers, silent, len(held) - answers

    _found, _answers, known_silent, known_controls = (
        report.found_at_5,
        report.answers,
        sum(1 for r in report.results if r["control"] and not r["returned"]),
        report.controls,
    )
    reachable, total, _s, _c = outcome(0.0)
    print(
        f"{'floor':<34} {'value':>8}  held-out answers kept (of {reachable} reachable)  held-out controls "
        "silent"
    )
    for label, floor in floors:
        found, answers, silent, controls = outcome(floor)
        print(
            f"{label:<34} {floor:>8.4f}  {found:>3} / {reachable:<3} "
            f"({100 * found / max(1, reachable):5.1f} %)"
            f"                 {silent:>3} / {controls}"
        )
    print(
        f"# known set at the floor in force ({report.floor}): {known_silent} of {known_controls} controls "
        "silent",
        file=sys.stderr,
    )


if __name__ == "__main__":
    main()
