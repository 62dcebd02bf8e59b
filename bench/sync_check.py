"""What a sync check costs against what it saves: a check of an unchanged folder against a rebuild of it.

    python bench/sync_check.py [-n 2000] [--rounds 3] [--kib 8]

A folder of N text files (each about --kib KiB) is built once with the "hash" embedder into a throw-away
SQLite store. Then, per round and in this process: a sync check of the unchanged folder (stat only: no
file read), a rebuild of the unchanged folder (the build's own fast path: every file read and
fingerprinted, nothing embedded), and a check after one file was touched (one file read). Prints each
time and the ratio check / rebuild, the figure that says whether a short sync period is affordable.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("-n", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kib", type=int, default=8)
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="sync-check-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'bench.sqlite3'}"
    os.environ["EMBED_BACKEND"] = "hash"
    os.environ["INDEX_DIR"] = str(scratch / "indexes")
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    folder = scratch / "docs"
    folder.mkdir()
    sentence = "Paragraph {i} of document {d} says something about policy number {d}-{i}. "
    for d in range(args.n):
        paragraphs = ["".join(sentence.format(i=i, d=d) for _ in range(4)) for i in range(args.kib * 4)]
        (folder / f"doc{d:05d}.md").write_text(f"# Document {d}\n\n" + "\n\n".join(paragraphs) + "\n")
    os.environ["KNOWLEDGE_SYNCBENCH_FOLDER"] = str(folder)
    import django

    django.setup()
    from django.core.management import call_command

    from collections_app.services import sync
    from collections_app.services.agents import create_agent, create_collection
    from collections_app.services.builds import build_collection
    from collections_app.services.sync_check import check_source

    call_command("migrate", verbosity=0)
    agent = create_agent(agent_id="bench")[0]
    collection = create_collection(agent=agent, name="syncbench", method="fixed", size=2000)
    started = time.perf_counter()
    first = build_collection(collection=collection, requested_by="bench")
    print(
        f"# {args.n} files of ~{args.kib} KiB; first build {time.perf_counter() - started:.1f} s "
        f"({first.passages} paragraphs, {first.status})"
    )
    sync.set_sync(collection=collection, every=5)
    check_source(collection=collection)  # the first check fingerprints every file once
    checks, rebuilds, touched = [], [], []
    for round_number in range(args.rounds):
        started = time.perf_counter()
        found = check_source(collection=collection)
        checks.append(time.perf_counter() - started)
        assert found.outcome == "unchanged" and found.fingerprinted == 0, found.outcome
        started = time.perf_counter()
        run = build_collection(collection=collection, requested_by="bench")
        rebuilds.append(time.perf_counter() - started)
        assert run.documents_reused == args.n, run.status
        path = folder / f"doc{round_number:05d}.md"
        os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 1_000_000_000))
        started = time.perf_counter()
        found = check_source(collection=collection)
        touched.append(time.perf_counter() - started)
        assert found.fingerprinted == 1 and found.build is None, found.outcome
        print(
            f"round {round_number + 1}: check {checks[-1] * 1000:.0f} ms, rebuild {rebuilds[-1] * 1000:.0f} "
            "ms, "
            f"check after a touch {touched[-1] * 1000:.0f} ms"
        )
    check, rebuild = statistics.median(checks), statistics.median(rebuilds)
    print(
        f"median: check {check * 1000:.0f} ms, rebuild of the unchanged folder {rebuild * 1000:.0f} ms, "
        f"check / rebuild {check / rebuild:.3f}; check after one touch "
        f"{statistics.median(touched) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    main()
