"""Where recall's missed evidence sits, on LoCoMo's development split, in this process over the store of
an earlier `make bench-memory` run (data/bench/memory-locomo.sqlite3).

    python bench/memory/locomo_misses.py [--data <locomo-dev>] [--budgets 1000 8000]

For each budget (with `most` 50, as the bench asks), every evidence turn of every question is classed:

* found: inside one returned excerpt;
* near: its record is quoted, and the turn is 1, 2, ... lines away from a quoted line (6 means 6 or more);
* not quoted: nothing of its record is in the answer;

and, for a turn not found, the rank (from 0) of the candidate holding it among all candidates in the
fused order recall takes them in: far past the number of excerpts means the ranking does not reach it,
just past means the budget ran out. Counts are per category (1 multi-hop, 2 temporal, 3 open-domain,
4 single-hop). Nothing of the questions' or turns' text is printed.
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "memory"))

from locomo_data import NoData, default_folder, load  # noqa: E402
from memory_locomo import WORK, _map_records, server_env  # noqa: E402


def line_of(lines: list[tuple[int, int]], start: int, end: int) -> int:
    return next(i for i, (a, b) in enumerate(lines) if a <= start and end <= b)


def classify(conversation, question, excerpts: list[dict], ranked: list) -> list[tuple[str, int | None]]:
    """(class, rank of the candidate holding the turn) of each evidence turn of `question`."""
    out = []
    for dia_id in question.evidence:
        session, start, end = conversation.turn(dia_id)
        mine = [e for e in excerpts if e["id"] == session.record_id]
        rank = next(
            (i for i, c in enumerate(ranked) if c.id == session.record_id and c.start <= start < c.end), None
        )
        if any(e["start"] <= start and end <= e["end"] for e in mine):
            out.append(("found", rank))
            continue
        if not mine:
            out.append(("not quoted", rank))
            continue
        here = line_of(session.lines, start, end)
        quoted = [
            i
            for i, (a, b) in enumerate(session.lines)
            if any(e["start"] <= a and b <= e["end"] for e in mine)
        ]
        away = min((abs(here - i) for i in quoted), default=6)
        out.append((f"near {min(away, 6)}", rank))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=default_folder(ROOT))
    parser.add_argument("--store", type=Path, default=WORK / "memory-locomo.sqlite3")
    parser.add_argument("--budgets", type=int, nargs="*", default=[1000, 8000])
    args = parser.parse_args()
    try:
        conversations = load(args.data)
    except NoData as exc:
        raise SystemExit(str(exc)) from None
    if not args.store.exists():
        raise SystemExit(f"no store at {args.store}: run `make bench-memory` first")
    server_env(f"sqlite:///{args.store}")
    import django

    django.setup()
    from bench.common.embedding_cache import install

    install()
    from collections_app.models import Agent
    from memory_app import services
    from ragsite import embedding

    # The module (services.recall is also the name of its function): its fused order, which the answer
    # does not show, is what says how far the ranking reaches.
    recall_module = importlib.import_module("memory_app.services.recall")
    agents = {c.name: Agent.objects.get(agent_id=f"locomo-{c.name}") for c in conversations}
    _map_records(conversations, agents)
    embedder = embedding.get_embedder()
    for budget in args.budgets:
        classes: dict[int, Counter] = {}
        ranks: dict[str, list[int]] = {}
        held = []
        for conversation in conversations:
            agent = agents[conversation.name]
            entry = recall_module.agent_index(agent, embedder.model, embedder.window)
            for question in conversation.questions:
                answer = services.recall(agent=agent, query=question.question, most=50, max_chars=budget)
                held.append(len(answer["excerpts"]))
                vector = embedder.embed([question.question])[0]
                ordered, _text_of, _choose = recall_module._ordered(
                    entry.index, question.question, 50, budget, vector
                )
                ranked = list(ordered)
                for name, rank in classify(conversation, question, answer["excerpts"], ranked):
                    classes.setdefault(question.category, Counter())[name] += 1
                    if name != "found" and rank is not None:
                        ranks.setdefault("near" if name.startswith("near") else name, []).append(rank)
        total = Counter()
        for counter in classes.values():
            total.update(counter)
        print(f"== {budget} characters: excerpts per question p50 {statistics.median(held):.0f}")
        for category in sorted(classes):
            print(
                f"  category {category}: "
                + ", ".join(f"{k} {v}" for k, v in sorted(classes[category].items()))
            )
        print("  all:        " + ", ".join(f"{k} {v}" for k, v in sorted(total.items())))
        for name, values in sorted(ranks.items()):
            values.sort()
            quantiles = [values[int(q * (len(values) - 1))] for q in (0.1, 0.25, 0.5, 0.75, 0.9)]
            print(f"  rank of the candidate holding a missed turn ({name}): p10/25/50/75/90 {quantiles}")


if __name__ == "__main__":
    main()
