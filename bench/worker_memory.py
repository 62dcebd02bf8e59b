"""Private memory of separate worker-like processes that each load the local embedder.

Starts `--processes` Python processes one after another; each runs `django.setup()`, embeds a few
texts with the configured local embedder and waits. A process is started only when the one before it
is warm, and USS/PSS/RSS of every process are read from /proc/<pid>/smaps_rollup while all are alive.

    .venv/bin/python bench/worker_memory.py --processes 4
    EMBED_CACHE_DIR= .venv/bin/python bench/worker_memory.py   # private weights, as before the cache
"""

import argparse
import os
import subprocess
import sys

CHILD = r"""
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ragsite.settings")
import django
django.setup()
if sys.argv[1] == "embed":
    from ragsite.embedding import get_embedder
    get_embedder("local").embed(["a first text about memory", "the second one is longer " * 20, "third"])
print("ready", flush=True)
sys.stdin.readline()
"""


def rollup(pid: int) -> dict[str, int]:
    """USS (private clean + dirty), PSS and RSS in KiB."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) >= 3 and parts[0].endswith(":"):
                fields[parts[0][:-1]] = int(parts[1])
    return {
        "uss": fields["Private_Clean"] + fields["Private_Dirty"],
        "pss": fields["Pss"],
        "rss": fields["Rss"],
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=4)
    parser.add_argument("--setup-only", action="store_true", help="django.setup() without the embedder")
    args = parser.parse_args()
    children = []
    for _ in range(args.processes):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, "setup" if args.setup_only else "embed"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=os.environ
        )
        if child.stdout.readline().strip() != "ready":
            raise SystemExit("a child process failed to start")
        children.append(child)
    try:
        for index, child in enumerate(children, 1):
            m = rollup(child.pid)
            print(f"process {index}: USS {m['uss'] / 1024:7.1f} MiB  PSS {m['pss'] / 1024:7.1f} MiB  "
                  f"RSS {m['rss'] / 1024:7.1f} MiB")
    finally:
        for child in children:
            child.stdin.close()
            child.wait()


if __name__ == "__main__":
    main()
