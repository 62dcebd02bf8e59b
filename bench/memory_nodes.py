"""Record nodes on a real corpus, with the real local model: division quality, storage, write cost.

    python bench/memory_nodes.py [CORPUS] [--records 40] [--min-chars 4000] [--max-chars 12000] [--seed 7]

CORPUS is a BEIR corpus.jsonl(.gz); the default is the SciFact copy in ../shared/datasets beside the
repository. Consecutive abstracts are concatenated into long records of a random length between
--min-chars and --max-chars, in two layouts: abstracts separated by a blank line ("paragraphs"),
and by a single space ("run-on", where no paragraph or line break can help the division).

The store is a throw-away SQLite file in a temporary folder, migrated from scratch; the embedder is
EMBED_BACKEND=local (all-MiniLM-L6-v2, a 256-token window); django-q2 is NOT in sync mode, so a store
only enqueues its node build on the ORM broker, as in production. Prints, per layout:

* nodes that begin inside a sentence, as a share of the nodes after the first (a node begins at a
  sentence start when the text before it, spaces aside, ends with . ! ? 。 ． ！ ？ (closing quotes or
  brackets allowed) or with a line break), against the baseline of cutting at the window's end
  (`window_end_char`) with no boundary rule, measured in the same run;
* bytes added per divided record: the SQLite file's growth (after VACUUM) when the nodes are
  written, and the payload of the node rows' values;
* store latency with node building queued: the median of `store_memory` (count tokens, embed the
  record, insert, enqueue), and of the enqueue alone;
* node build time per node (the queue's cost): `build_nodes` for each record, divided by its nodes.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

from ragsite import embedding

REPO = Path(__file__).resolve().parents[1]
DEFAULT_CORPUS = REPO.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl.gz"

SENTENCE_END = re.compile(r"(?:[.!?]|[。．！？])[\"'”’)\]»]*$")


def read_abstracts(path: Path) -> list[str]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as lines:
        return [text for line in lines if (text := json.loads(line).get("text", "").strip())]


def long_records(
    abstracts: list[str], count: int, low: int, high: int, seed: int, separator: str
) -> list[str]:
    """`count` records of consecutive abstracts, each between `low` and `high` characters."""
    rng = random.Random(seed)
    records, position = [], 0
    while len(records) < count and position < len(abstracts):
        target, parts, size = rng.randint(low, high), [], 0
        while position < len(abstracts) and size < target:
            piece = abstracts[position]
            position += 1
            if size + len(piece) + len(separator) > high:
                if size >= low:
                    break
                continue  # too long to add without passing the cap; try the next abstract
            parts.append(piece)
            size += len(piece) + len(separator)
        if size >= low:
            records.append(separator.join(parts))
    return records


def begins_inside_a_sentence(text: str, start: int) -> bool:
    before = text[:start]
    if before.rstrip(" \t").endswith(("\n", "\r")):
        return False
    return not SENTENCE_END.search(before.rstrip())


def inside_share(records: list[str], spans_per_record: list[list[tuple[int, int]]]) -> tuple[float, int]:
    starts = [
        (text, start) for text, spans in zip(records, spans_per_record, strict=True) for start, _ in spans[1:]
    ]
    inside = sum(begins_inside_a_sentence(text, start) for text, start in starts)
    return (inside / len(starts) if starts else 0.0), len(starts)


def hard_cut_spans(text: str, embedder) -> list[tuple[int, int]]:
    """The baseline: cut exactly where the window closes, no boundary classes."""
    spans, position = [], 0
    while position < len(text):
        end = position + max(1, embedder.window_end_char(text[position:], embedder.window))
        spans.append((position, end))
        position = end
    return spans


def setup_django(folder: Path) -> None:
    os.environ["DATABASE_URL"] = f"sqlite:///{folder / 'bench.sqlite3'}"
    os.environ["EMBED_BACKEND"] = "local"
    os.environ["Q_SYNC"] = "false"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def database_bytes() -> int:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM")
        cursor.execute("PRAGMA page_count")
        pages = cursor.fetchone()[0]
        cursor.execute("PRAGMA page_size")
        return pages * cursor.fetchone()[0]


def measure(layout: str, records: list[str], agent) -> dict:
    import django_q.tasks
    from django_q.conf import Conf

    from memory_app import services
    from memory_app.models import Memory, RecordNode

    assert not Conf.SYNC, "django-q must not run tasks synchronously here"
    embedder = embedding.get_embedder()
    Memory.objects.all().delete()
    enqueue_ms: list[float] = []
    real_async_task = django_q.tasks.async_task

    def timed_async_task(*args, **kwargs):
        started = time.perf_counter()
        try:
            return real_async_task(*args, **kwargs)
        finally:
            enqueue_ms.append((time.perf_counter() - started) * 1000)

    django_q.tasks.async_task = timed_async_task
    store_ms, stored = [], []
    try:
        for text in records:
            started = time.perf_counter()
            memory, nodes = services.store_memory(agent=agent, text=text)
            store_ms.append((time.perf_counter() - started) * 1000)
            stored.append((memory, nodes))
    finally:
        django_q.tasks.async_task = real_async_task
    queued = sum(1 for _m, nodes in stored if nodes)

    before = database_bytes()
    per_node_ms, node_counts = [], []
    for memory, _nodes in stored:
        started = time.perf_counter()
        built = services.build_nodes("mem", memory.pk)
        elapsed = (time.perf_counter() - started) * 1000
        if built.nodes:
            per_node_ms.append(elapsed / built.nodes)
            node_counts.append(built.nodes)
    after = database_bytes()

    spans = [
        [(n.start_char, n.end_char) for n in services.record_nodes("mem", memory.pk)] for memory, _ in stored
    ]
    divided = sum(1 for s in spans if s)
    payload = sum(
        len(bytes(n.embedding or b"")) + len(n.parent_kind) + len(n.embedding_model) + 6 * 8
        for n in RecordNode.objects.all()
    )
    baseline = [hard_cut_spans(text, embedder) if s else [] for text, s in zip(records, spans, strict=True)]
    share, starts = inside_share(records, spans)
    base_share, base_starts = inside_share(records, baseline)
    over = sum(1 for n in RecordNode.objects.all() if n.token_count > n.window)
    return {
        "layout": layout,
        "records": len(records),
        "chars_median": statistics.median(len(t) for t in records),
        "queued": queued,
        "divided": divided,
        "nodes": sum(node_counts),
        "nodes_per_record": statistics.mean(node_counts) if node_counts else 0,
        "inside_share": share,
        "inside_starts": starts,
        "baseline_share": base_share,
        "baseline_starts": base_starts,
        "over_window": over,
        "file_bytes_per_record": (after - before) / divided if divided else 0,
        "payload_bytes_per_record": payload / divided if divided else 0,
        "store_ms_median": statistics.median(store_ms),
        "enqueue_ms_median": statistics.median(enqueue_ms) if enqueue_ms else 0.0,
        "build_ms_per_node_median": statistics.median(per_node_ms) if per_node_ms else 0.0,
        "model": embedder.model,
        "window": embedder.window,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--records", type=int, default=40)
    parser.add_argument("--min-chars", type=int, default=4000)
    parser.add_argument("--max-chars", type=int, default=12000)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    abstracts = read_abstracts(args.corpus)
    with tempfile.TemporaryDirectory(prefix="ragsite-bench-") as folder:
        setup_django(Path(folder))
        from collections_app.services.agents import create_agent

        agent, _key = create_agent(agent_id="bench")
        results = [
            measure(
                layout,
                long_records(abstracts, args.records, args.min_chars, args.max_chars, args.seed, sep),
                agent,
            )
            for layout, sep in (("paragraphs", "\n\n"), ("run-on", " "))
        ]
    first = results[0]
    print(
        f"corpus {args.corpus.name}: {first['records']} records of {args.min_chars}-{args.max_chars} "
        "characters "
        f"(median {first['chars_median']:.0f}); model {first['model']}, window {first['window']} tokens"
    )
    for r in results:
        print(
            f"\n[{r['layout']}] {r['divided']}/{r['records']} records divided ({r['queued']} queued at "
            "store), "
            f"{r['nodes']} nodes, {r['nodes_per_record']:.1f} per divided record; nodes over the window: "
            f"{r['over_window']}"
        )
        ratio = r["inside_share"] / r["baseline_share"] if r["baseline_share"] else float("nan")
        print(
            f"  nodes beginning inside a sentence: {r['inside_share']:.1%} of {r['inside_starts']} "
            f"(cut at window end: {r['baseline_share']:.1%} of {r['baseline_starts']}; ratio {ratio:.2f})"
        )
        print(
            f"  bytes added per divided record: {r['file_bytes_per_record']:,.0f} on disk (SQLite, after "
            "VACUUM), "
            f"{r['payload_bytes_per_record']:,.0f} of row values"
        )
        print(
            f"  store_memory with node building queued: median {r['store_ms_median']:.1f} ms "
            f"(of which the enqueue: {r['enqueue_ms_median']:.2f} ms)"
        )
        print(f"  node build: median {r['build_ms_per_node_median']:.1f} ms per node")


if __name__ == "__main__":
    main()
