"""Recall p50 with and without recall's filters, and store p50, on one agent's short memories.

    python bench/memory/recall_filters_latency.py [--memories 5000] [--questions 200]

The hash embedder (no model needed), a throw-away SQLite store; records imported with tags and
creation times over a year, then warm recalls (the agent's index cached) for each filter in turn,
interleaved, then 60 stores. Figures in docs/memory.md (*Filters, time and superseded statements*).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

WORDS = (
    "river stone lantern harbor meadow copper signal orchard glacier timber compass ember falcon quartz "
    "willow beacon canyon violet thunder marble saddle pepper cobalt walnut anchor prism tundra velvet "
    "osprey cinder maple harvest nebula juniper summit lagoon budget meeting family travel doctor"
).split()
FILTERS = {
    "none": {},
    "tags": {"tags": ["work"]},
    "since+kinds": {"since": "2026-06-01T00:00:00Z", "kinds": ["mem"]},
    "valid_at": {"valid_at": "2026-06-01T00:00:00Z"},
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memories", type=int, default=5000)
    parser.add_argument("--questions", type=int, default=200)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    scratch = Path(tempfile.mkdtemp(prefix="recall-filters-"))
    os.environ.update(
        DATABASE_URL=f"sqlite:///{scratch / 'bench.sqlite3'}",
        EMBED_BACKEND="hash",
        DJANGO_SETTINGS_MODULE="config.settings",
        LOG_LEVEL="WARNING",
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from collections_app.services.agents import create_agent
    from memory_app import services
    from memory_app.services.records import import_records

    rng = random.Random(1)
    agent = create_agent(agent_id="bench")[0]
    lines = []
    for i in range(args.memories):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 30)))
        item = {
            "kind": rng.choice(["mem", "ep"]),
            "text": words + ".",
            "created_at": f"2026-{1 + i % 12:02d}-{1 + i % 28:02d}T00:00:00Z",
            "tags": rng.sample(["work", "home", "travel", "health"], rng.randint(0, 2)),
        }
        lines.append(json.dumps(item))
    import_records(agent=agent, lines=lines)
    questions = [" ".join(rng.sample(WORDS, 4)) for _ in range(args.questions)]
    services.recall(agent=agent, query="warm up")
    times: dict[str, list[float]] = {name: [] for name in FILTERS}
    for question in questions:
        for name, filters in FILTERS.items():
            start = time.perf_counter()
            services.recall(agent=agent, query=question, most=5, **filters)
            times[name].append(time.perf_counter() - start)
    stores = []
    for i in range(60):
        start = time.perf_counter()
        services.store_memory(agent=agent, text=f"note {i} {questions[i % len(questions)]}")
        stores.append(time.perf_counter() - start)
    for name, taken in times.items():
        print(f"recall p50, {name}: {statistics.median(taken) * 1000:.2f} ms")
    print(f"store p50: {statistics.median(stores) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
