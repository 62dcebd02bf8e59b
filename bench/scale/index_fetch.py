"""How long a new web node takes to get a build's index it lacks (issue 43 item 5): fetched from the
database beside the build and verified (`services.indexes.store.fetch_files`), against copying the same
files on the same disk, in one process, on a kept scale store (bench/scale/scale_store.py; make it first
with `bench/scale/search_scale.py --sizes N --populate`).

    python bench/scale/index_fetch.py --rows 100000 --rounds 3
    python bench/scale/index_fetch.py --rows 1000000 --rounds 1

The store's build gets its index files stored once, as a build's commit stores them (kept there for later
runs). Each round then fetches them into a scratch folder (every chunk read in order, every file checked
against its size and SHA-256, the folder opened as an index, fsynced and renamed into place) and copies the
folder with an fsync of each file (the disk's own speed); the two alternate. Bytes a paragraph, wall clock,
this process's CPU and the load average are printed beside each other, and written to
bench/results/index_fetch-N.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "scale"))
from index_size import timed  # noqa: E402
from scale_store import WORK, kept_index  # noqa: E402

from bench.common.results import provenance  # noqa: E402


def copy_with_fsync(source: Path, target: Path) -> None:
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "rb") as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, 4 << 20)
            dst.flush()
            os.fsync(dst.fileno())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="the kept store's size")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    collection, folder = kept_index(args.rows)
    from collections_app.services.indexes.store import fetch_files, is_stored, store_files

    key = folder.name
    if not (folder / "meta.json").exists():
        raise SystemExit(f"no index for the {args.rows:,} store: run search_scale.py --populate first")
    stored = None
    if not is_stored(collection_id=collection.pk, key=key):
        stored = timed(lambda: store_files(collection=collection, key=key, folder=folder))
        print(json.dumps({"stored": stored}), flush=True)
    scratch = WORK / f"fetch-{args.rows}"
    rounds = []
    for _ in range(args.rounds):
        shutil.rmtree(scratch, ignore_errors=True)
        fetched = timed(lambda: fetch_files(collection_id=collection.pk, key=key, root=scratch / "fetched"))
        copied = timed(lambda: copy_with_fsync(folder, scratch / "copied"))
        rounds.append({"fetch": fetched, "copy": copied})
        print(json.dumps(rounds[-1]), flush=True)
    shutil.rmtree(scratch, ignore_errors=True)
    index_bytes = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    result = {
        "rows": args.rows,
        "index_bytes": index_bytes,
        "bytes_a_paragraph": index_bytes / args.rows,
        "stored": stored,
        "rounds": rounds,
        "fetch_over_copy": [r["fetch"]["wall_s"] / r["copy"]["wall_s"] for r in rounds],
        "run": provenance(),
    }
    out = ROOT / "bench" / "results" / f"index_fetch-{args.rows}.json"
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "rounds"}, indent=1))


if __name__ == "__main__":
    main()
