"""Issue 29 item 5: the tokenizing and carried-text work of writing an index, timed alone on a kept
scale store (bench/scale_store.py; make it first with `bench/search_scale.py --sizes N`).

Times `_write_rows` (reading every row, three lexical fields a row, the writers' merge; not the IVF
lists, not the files) once per process count asked for, and prints wall clock and CPU: this process's
own and its tokenizing processes' (spawned children, counted once they are reaped). The load average
is printed beside each run, since the wall clock means little on a busy machine.

    python bench/index_write.py --rows 1000000 --processes 1 2
    python bench/index_write.py --cut terms bytes     # A/B: terms in Python against byte_terms
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from scale_store import setup_django  # noqa: E402


def cpu_seconds(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000, help="the kept store's size")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument(
        "--cut",
        nargs="+",
        choices=["bytes", "terms"],
        default=["bytes"],
        help="bytes: row_postings (index.byte_terms); terms: row_postings_of_terms, term by term in Python",
    )
    args = parser.parse_args()
    setup_django(args.rows)

    from django.test.utils import override_settings

    from collections_app.index.postings import row_postings, row_postings_of_terms
    from collections_app.models import Collection, CollectionBuilt
    from collections_app.services import indexes

    collection = Collection.objects.get(agent__agent_id="scale", name="scale")
    built = CollectionBuilt.objects.get(collection=collection)
    results = []
    from ragsite.lexical import terms

    terms("warm")  # the term class's tables, made once a process (~1 s): not counted against the first arm
    cuts = {"bytes": row_postings, "terms": row_postings_of_terms}
    for cut, processes in [(cut, processes) for processes in args.processes for cut in args.cut]:
        indexes.row_postings = cuts[cut]  # what _write_rows hands its tokenizing processes
        load = os.getloadavg()
        own, children = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        with override_settings(INDEX_WRITE_PROCESSES=processes):
            writer, _context, _carried, same = indexes._write_rows(collection, built)
        result = {
            "rows": writer.rows,
            "cut": cut,
            "processes": processes,
            "wall_s": round(time.perf_counter() - started, 1),
            "cpu_here_s": round(cpu_seconds(resource.RUSAGE_SELF) - own, 1),
            "cpu_tokenizers_s": round(cpu_seconds(resource.RUSAGE_CHILDREN) - children, 1),
            "load_before": [round(x, 2) for x in load],
            "load_after": [round(x, 2) for x in os.getloadavg()],
            "same_rows": same,
        }
        del writer, _context, _carried
        results.append(result)
        print(json.dumps(result), flush=True)


if __name__ == "__main__":  # the tokenizing processes are spawned and import this module
    main()
