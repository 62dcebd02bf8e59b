"""The index a build writes, against tantivy's over the same texts, in one run: bytes a file and a paragraph,
and the time each takes to write, on a kept scale store (bench/scale/scale_store.py; make it first with
`bench/scale/search_scale.py --sizes N --populate`).

    python bench/scale/index_size.py --rows 100000 --rounds 2

Each round writes ragsite's index again from the rows (`write_index`: reading the rows, tokenizing in
INDEX_WRITE_PROCESSES processes, the IVF lists, the files) and then tantivy's into a fresh folder (its
default tokenizer, one indexing thread and a 200 MB heap, as bench/scale/scale_peers.py), and prints the
wall clock, this process's CPU and its children's, and the load average beside each figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "scale"))
from scale_store import WORK, kept_index  # noqa: E402


def cpu_seconds() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(work) -> dict:
    load, wall, cpu = os.getloadavg()[0], time.perf_counter(), cpu_seconds()
    work()
    return {"wall_s": time.perf_counter() - wall, "cpu_s": cpu_seconds() - cpu, "load": load}


def folder_bytes(folder: Path) -> dict[str, int]:
    return {p.relative_to(folder).as_posix(): p.stat().st_size for p in folder.rglob("*") if p.is_file()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="the kept store's size")
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    collection, folder = kept_index(args.rows)
    import tantivy

    from collections_app.models import Paragraph
    from collections_app.services.indexes import write_index

    texts = Paragraph.objects.filter(collection=collection).order_by("ordinal").values_list("text", flat=True)

    def ours():
        shutil.rmtree(folder, ignore_errors=True)
        write_index(collection=collection, fetch=False)

    scratch = Path(tempfile.mkdtemp(prefix="tantivy-", dir=WORK))

    def theirs():
        shutil.rmtree(scratch, ignore_errors=True)
        scratch.mkdir()
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("row", stored=True, indexed=False, fast=True)
        builder.add_text_field("text", stored=False)
        index = tantivy.Index(builder.build(), path=str(scratch))
        writer = index.writer(heap_size=200_000_000, num_threads=1)
        for row, text in enumerate(texts.iterator(chunk_size=10000)):
            writer.add_document(tantivy.Document(row=row, text=text))
        writer.commit()
        writer.wait_merging_threads()

    rounds = []
    for _ in range(args.rounds):
        rounds.append({"ragsite": timed(ours), "tantivy": timed(theirs)})
        print(json.dumps(rounds[-1]), flush=True)
    files, peer = folder_bytes(folder), folder_bytes(scratch)
    shutil.rmtree(scratch, ignore_errors=True)
    result = {
        "rows": args.rows,
        "rounds": rounds,
        "write_over_tantivy": [r["ragsite"]["wall_s"] / r["tantivy"]["wall_s"] for r in rounds],
        "index_bytes": sum(files.values()),
        "bytes_a_paragraph": sum(files.values()) / args.rows,
        "files": files,
        "tantivy_bytes": sum(peer.values()),
    }
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
