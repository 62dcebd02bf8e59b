"""Private memory per web worker: separate processes against workers forked from a warmed master.

One run, every arm against the same scratch store (the demo agent and its sample handbook, built
by `manage.py demo` in a temporary folder), memory read from /proc/<pid>/smaps_rollup:

- `separate`: `--processes` Python processes started one after another, each running
  `django.setup()` and embedding three texts with the local embedder, then waiting (the previous
  baseline: nothing shared but the mapped weights file and the libraries).
- `uvicorn`: `uvicorn config.asgi:application --workers N`, real searches over HTTP (uvicorn's
  workers are fresh interpreters, so they share what separate processes share).
- `gunicorn-1`, `gunicorn`: `gunicorn -c python:config.gunicorn_conf` with 1 and N workers.
- `gunicorn-nofreeze`, `gunicorn-nowarm`: the same config without `gc.freeze()`, and without the
  master's warm-up (the application still preloaded), to say what each buys;
  `gunicorn-collect`, `gunicorn-nofreeze-collect`: a full `gc.collect()` in each worker once it has
  booted, with and without the freeze (a full collection is rare in a worker's first requests).

Every server answers hybrid searches (the question embedded by the server) from `--clients`
concurrent clients, a new connection each, until every worker has answered at least
`--per-worker` of them (counted by pid in gunicorn's access log; uvicorn's by total). Memory is
read once every worker has booted and again after serving; `--dirty` lists, for one worker of the
project's config, the mappings whose private memory grew while it served.

    nice -n 10 .venv/bin/python bench/worker_memory.py --workers 4
    nice -n 10 .venv/bin/python bench/worker_memory.py --only separate --processes 4
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
QUESTIONS = [json.loads(line) for line in (ROOT / "collections_app" / "sample_known_answers.jsonl").open()]
QUESTIONS = [item for item in QUESTIONS if item.get("answer")]

CHILD = r"""
import os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
import django
django.setup()
if sys.argv[1] == "embed":
    from ragsite.embedding import get_embedder
    get_embedder("local").embed(["a first text about memory", "the second one is longer " * 20, "third"])
print("ready", flush=True)
sys.stdin.readline()
"""

# The project's configuration with one of its steps left out, for the `gunicorn-no*` arms.
VARIANTS = {
    "gunicorn-nofreeze": "from config.gunicorn_conf import *  # noqa\n"
    "def pre_fork(server, worker):\n"
    "    from django.db import connections\n    connections.close_all()\n",
    "gunicorn-nowarm": "from config.gunicorn_conf import *  # noqa\ndef when_ready(server):\n    pass\n",
}
# A full collection in each worker as soon as it has booted, with and without the freeze: what a
# worker's first full collection (rare, but it comes as its heap grows) does to the inherited pages.
COLLECT = "def post_worker_init(worker):\n    import gc\n    gc.collect()\n"
VARIANTS["gunicorn-collect"] = "from config.gunicorn_conf import *  # noqa\n" + COLLECT
VARIANTS["gunicorn-nofreeze-collect"] = VARIANTS["gunicorn-nofreeze"] + COLLECT


def rollup(pid: int) -> dict[str, int]:
    """USS (private clean + dirty), PSS, RSS and Private_Dirty in KiB.

    USS counts a clean page of a mapped file that only this process has read so far (page cache,
    shared as soon as another process reads it); Private_Dirty is what the process wrote (its heap,
    the pages it copied from its master): memory no other process can share."""
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
        "dirty": fields["Private_Dirty"],
    }


def private_by_mapping(pid: int) -> dict[int, tuple[str, int]]:
    """{mapping start address: (name, private KiB, clean + dirty)}; names are a file's, [heap],
    [stack] or [anon]."""
    found: dict[int, list] = {}
    current = None
    with open(f"/proc/{pid}/smaps") as handle:
        for line in handle:
            parts = line.split()
            if re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", parts[0]):
                name = parts[5] if len(parts) > 5 else "[anon]"
                current = found[int(parts[0].split("-")[0], 16)] = [
                    name if name.startswith("[") else "…/" + Path(name).name,
                    0,
                ]
            elif parts[0] in ("Private_Clean:", "Private_Dirty:"):
                current[1] += int(parts[1])
    return {start: (name, kib) for start, (name, kib) in found.items()}


def grown_while_serving(before: dict, after: dict, master: dict) -> collections.Counter:
    """Private KiB a worker gained, by mapping name and by whether the master holds the same mapping
    (inherited: pages copied on write) or not (new: made by the worker, e.g. a thread's malloc arena)."""
    grown: collections.Counter = collections.Counter()
    for start, (name, kib) in after.items():
        kind = "inherited" if start in master else "new"
        grown[f"{kind} {name}"] += kib - before.get(start, (name, 0))[1]
    return grown


def mib(kib: float) -> str:
    return f"{kib / 1024:6.1f}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def load_average() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


# --- the separate-process baseline ----------------------------------------------------------------


def separate(processes: int, env: dict) -> list[dict]:
    children = []
    for _ in range(processes):
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, "embed"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=ROOT,
        )
        if child.stdout.readline().strip() != "ready":
            raise SystemExit("a child process failed to start")
        children.append(child)
    try:
        return [rollup(child.pid) for child in children]
    finally:
        for child in children:
            child.stdin.close()
            child.wait()


# --- servers ----------------------------------------------------------------------------------------


def make_store(work: Path) -> tuple[dict, str]:
    """A scratch store with the demo agent and its built handbook; (environment, API key)."""
    env = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE")}
    env.update(
        {
            "DATA_DIR": str(work / "data"),
            "DATABASE_URL": f"sqlite:///{work / 'store.sqlite3'}",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "LOG_LEVEL": "WARNING",
        }
    )
    env.setdefault("EMBED_CACHE_DIR", str(work / "data" / "model-cache"))
    for args in (["migrate", "--noinput"], ["demo"]):
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        if done.returncode:
            raise SystemExit(f"manage.py {args[0]} failed:\n{done.stderr[-2000:]}")
    key = done.stdout.strip()  # the demo prints the new key alone on stdout, for scripts
    if not key.startswith("rsk_"):
        raise SystemExit("manage.py demo printed no API key")
    return env, key


class Server:
    def __init__(self, arm: str, workers: int, env: dict, work: Path):
        self.arm, self.workers, self.port = arm, workers, free_port()
        self.access = work / f"{arm}-access.log"
        self.log = (work / f"{arm}.log").open("w+")
        if arm == "uvicorn":
            command = [
                str(BIN / "uvicorn"),
                "config.asgi:application",
                "--port",
                str(self.port),
                "--workers",
                str(workers),
                "--no-access-log",
            ]
        else:
            config = "python:config.gunicorn_conf"
            if arm in VARIANTS:
                path = work / f"{arm.replace('-', '_')}.py"
                path.write_text(VARIANTS[arm])
                config = str(path)
            command = [
                str(BIN / "gunicorn"),
                "-c",
                config,
                "--access-logfile",
                str(self.access),
                "--access-logformat",
                "%(p)s %(s)s",
            ]
        server_env = {**env, "WEB_CONCURRENCY": str(workers), "WEB_BIND": f"127.0.0.1:{self.port}"}
        self.process = subprocess.Popen(
            command,
            cwd=ROOT,
            env=server_env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.base = f"http://127.0.0.1:{self.port}"

    def worker_pids(self) -> list[int]:
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        pids = []
        for pid in map(int, children):
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes()
            except FileNotFoundError:
                continue
            if b"resource_tracker" not in command:  # uvicorn's multiprocessing helper
                pids.append(pid)
        return pids

    def wait_ready(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            booted = len(self.worker_pids()) == self.workers
            try:
                # /mcp answers GET with 405 at once; openapi.json would make a worker build the schema.
                if booted and httpx.get(f"{self.base}/mcp", timeout=5).status_code == 405:
                    time.sleep(2)  # the other workers finish booting
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.log.seek(0)
        raise SystemExit(f"{self.arm} did not start:\n{self.log.read()[-3000:]}")

    def answered(self) -> collections.Counter:
        if self.arm == "uvicorn" or not self.access.exists():
            return collections.Counter()
        return collections.Counter(int(m) for m in re.findall(r"<(\d+)> 200", self.access.read_text()))

    def stop(self) -> None:
        os.killpg(self.process.pid, 15)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, 9)
        self.log.close()


def search(base: str, key: str, item: dict) -> bool:
    """One hybrid search on a new connection; whether the known answer is among the paragraphs."""
    response = httpx.post(
        f"{base}/api/v1/collections/handbook/search",
        timeout=60,
        headers={"Authorization": f"Bearer {key}", "Connection": "close"},
        json={"question": item["question"], "most": 5, "min_score": 0},
    )
    response.raise_for_status()
    body = response.json()
    if body["mode"] != "hybrid":
        raise SystemExit(f"expected a hybrid search, got {body['mode']}")
    return any(item["answer"].lower() in p["text"].lower() for p in body["paragraphs"])


def serve(server: Server, key: str, clients: int, per_worker: int) -> tuple[int, int, collections.Counter]:
    """Searches until every worker answered `per_worker` (uvicorn: per_worker × workers in all)."""
    sent = found = 0
    with ThreadPoolExecutor(clients) as pool:
        while sent < 4000:
            batch = [QUESTIONS[(sent + i) % len(QUESTIONS)] for i in range(clients * 4)]
            found += sum(pool.map(lambda item: search(server.base, key, item), batch))
            sent += len(batch)
            counts = server.answered()
            if server.arm == "uvicorn":
                if sent >= per_worker * server.workers * 2:
                    break
            elif len(counts) == server.workers and min(counts.values()) >= per_worker:
                break
    return sent, found, server.answered()


def run_server(arm: str, workers: int, env: dict, key: str, work: Path, args) -> dict:
    server = Server(arm, workers, env, work)
    try:
        server.wait_ready()
        pids = server.worker_pids()
        booted = {pid: rollup(pid) for pid in pids}
        before = private_by_mapping(pids[0])
        sent, found, counts = serve(server, key, args.clients, args.per_worker)
        time.sleep(1)
        after = {pid: rollup(pid) for pid in pids}
        master = rollup(server.process.pid)
        grown = None
        if args.dirty and arm == "gunicorn":
            grown = grown_while_serving(
                before, private_by_mapping(pids[0]), private_by_mapping(server.process.pid)
            )
        return {
            "arm": arm,
            "workers": workers,
            "master": master,
            "booted": booted,
            "after": after,
            "sent": sent,
            "found": found,
            "answered": counts,
            "grown": grown,
        }
    finally:
        server.stop()


def report(result: dict) -> None:
    arm, after, master = result["arm"], result["after"], result["master"]
    total_pss = master["pss"] + sum(m["pss"] for m in after.values())
    answered = result["answered"]
    print(
        f"\n{arm} ({result['workers']} worker{'s' if result['workers'] > 1 else ''}): {result['sent']} "
        "searches, "
        f"known answer in the top 5 for {result['found']}; per worker: "
        + (", ".join(str(answered.get(pid, 0)) for pid in after) if answered else "not counted")
    )
    print(
        f"  {'master' if arm != 'uvicorn' else 'supervisor':>12}: USS {mib(master['uss'])}  PSS "
        f"{mib(master['pss'])}  "
        f"RSS {mib(master['rss'])} MiB"
    )
    for index, (pid, m) in enumerate(after.items(), 1):
        b = result["booted"][pid]
        print(
            f"  {'worker ' + str(index):>12}: USS {mib(m['uss'])}  PSS {mib(m['pss'])}  RSS {mib(m['rss'])} "
            "MiB"
            f"   (booted: USS {mib(b['uss'])}  PSS {mib(b['pss'])})"
        )
    print(f"  {'total PSS':>12}: {mib(total_pss)} MiB")
    result["total_pss"] = total_pss
    if result["grown"]:
        print("  worker 1, private KiB grown while serving, by mapping (inherited from the master or new):")
        for name, kib in result["grown"].most_common(10):
            print(f"    {kib:8d}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--processes", type=int, default=4, help="separate processes (the baseline)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--per-worker", type=int, default=10, help="searches every worker answers at least")
    parser.add_argument(
        "--only",
        nargs="*",
        help="arms: separate uvicorn gunicorn-1 gunicorn gunicorn-nofreeze "
        "gunicorn-nowarm gunicorn-collect gunicorn-nofreeze-collect",
    )
    parser.add_argument(
        "--dirty", action="store_true", help="what a worker's private memory grew by, by mapping"
    )
    args = parser.parse_args()
    arms = args.only or [
        "separate",
        "uvicorn",
        "gunicorn-1",
        "gunicorn",
        "gunicorn-nofreeze",
        "gunicorn-nowarm",
        "gunicorn-collect",
        "gunicorn-nofreeze-collect",
    ]
    print(f"load average at start: {load_average()}; {len(QUESTIONS)} questions")
    work = Path(tempfile.mkdtemp(prefix="worker-memory-"))
    try:
        env, key = make_store(work)
        results = {}
        for arm in arms:
            if arm == "separate":
                rows = separate(args.processes, env)
                print(f"\nseparate ({args.processes} processes, django.setup() + the local embedder):")
                for index, m in enumerate(rows, 1):
                    print(
                        f"  {'process ' + str(index):>12}: USS {mib(m['uss'])}  PSS {mib(m['pss'])}  "
                        f"RSS {mib(m['rss'])} MiB"
                    )
                results[arm] = rows
                continue
            workers = 1 if arm == "gunicorn-1" else args.workers
            results[arm] = run_server(arm, workers, env, key, work, args)
            report(results[arm])
        summarise(results)
        print(f"\nload average at the end: {load_average()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


def summarise(results: dict) -> None:
    """The issue's ratio, worker private against the first process's, and the marginal PSS."""
    print("\nsummary")
    if "separate" in results:
        rows = results["separate"]
        print(
            "  separate: process 2..n USS / process 1 USS = "
            + ", ".join(f"{m['uss'] / rows[0]['uss']:.0%}" for m in rows[1:])
        )
    one, many = results.get("gunicorn-1"), results.get("gunicorn")
    if one and many:
        first = one["total_pss"]  # a server with one worker: everything its one worker needs
        workers = list(many["after"].values())
        print(f"  gunicorn: a one-worker server (master + worker) holds {mib(first)} MiB PSS")
        print(
            "  gunicorn: worker USS / one-worker server = "
            + ", ".join(f"{m['uss'] / first:.1%}" for m in workers)
        )
        marginal = (many["total_pss"] - first) / (many["workers"] - 1)
        print(
            f"  gunicorn: marginal PSS per added worker = {mib(marginal)} MiB = {marginal / first:.1%} of "
            "the first"
        )
        if "separate" in results:
            print(
                "  gunicorn: worker USS / a separate process's USS = "
                + ", ".join(f"{m['uss'] / results['separate'][0]['uss']:.1%}" for m in workers)
            )
    for arm in (
        "uvicorn",
        "gunicorn-nofreeze",
        "gunicorn-nowarm",
        "gunicorn-collect",
        "gunicorn-nofreeze-collect",
    ):
        if arm in results and many:
            values = [m["uss"] for m in results[arm]["after"].values()]
            print(
                f"  {arm}: worker USS {', '.join(mib(v).strip() for v in values)} MiB; total PSS "
                f"{mib(results[arm]['total_pss'])} MiB against {mib(many['total_pss'])} for the project's "
                "config"
            )


if __name__ == "__main__":
    main()
