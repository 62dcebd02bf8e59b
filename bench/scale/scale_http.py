"""The HTTP phase of bench/scale/search_scale.py: the web tier serving one size's store, and its memory.

Each of SERVERS starts on a free port of 127.0.0.1 against the size's store (its DATABASE_URL and
INDEX_DIR are in the environment), is warmed, then answers 4 client threads for 15 s; the server embeds
each question. Memory is read from /proc/<pid>/smaps_rollup once the clients stop: RSS, PSS and USS
(private) of the master and of every worker.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
from scale_store import ROOT, WORK


def percentile(values, q):
    """The q-th percentile of durations in seconds, in milliseconds."""
    return float(np.percentile(np.asarray(values) * 1000, q))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def smaps(pid: int) -> dict[str, int]:
    """RSS, PSS, USS (private clean + dirty) and Private_Dirty in bytes, as the saved results hold them.

    USS counts a clean page of a mapped file only this process has read so far (shared as soon as another
    reads it); Private_Dirty is what the process wrote: memory no other process can share."""
    fields = {}
    with open(f"/proc/{pid}/smaps_rollup") as handle:
        for line in handle:
            parts = line.split()
            if len(parts) >= 3 and parts[0].endswith(":"):
                fields[parts[0][:-1]] = int(parts[1]) * 1024
    return {
        "uss": fields["Private_Clean"] + fields["Private_Dirty"],
        "pss": fields["Pss"],
        "rss": fields["Rss"],
        "dirty": fields["Private_Dirty"],
    }


def descendants(pid: int) -> list[int]:
    """Every process below `pid` that serves: uvicorn's workers (under it, or under its multiprocessing
    helper) or gunicorn's (its master's children), not the resource tracker, which maps nothing."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            found.append(int(child))
            found.extend(descendants(int(child)))
    serving = []
    for p in found:
        command = Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")
        if "resource_tracker" not in command and any(
            k in command for k in ("uvicorn", "gunicorn", "multiprocessing")
        ):
            serving.append(p)
    return serving


# The HTTP phase's servers: the project's web tier (gunicorn forking its workers from a warmed master,
# config/gunicorn_conf.py) with `--http` workers and with one (the first worker's footprint, master
# included), and `--http` separately started uvicorn workers (what this bench measured before 2026-12-02).
SERVERS = ("gunicorn", "gunicorn-1", "uvicorn")


def http_phase(n: int, args, model: str, asked: list[str]) -> dict:
    """Each of SERVERS on 127.0.0.1 under 4 client threads for 15 s; the server embeds each question."""
    from collections_app.models import Agent
    from collections_app.services.agents import issue_key

    raw = issue_key(agent=Agent.objects.get(agent_id="scale"))
    raw = raw[1] if isinstance(raw, tuple) else raw
    results = {
        server: serve(n, server, 1 if server == "gunicorn-1" else args.http, raw, asked) for server in SERVERS
    }
    # Issue 16: a second worker's private memory against the first's. Under gunicorn the first worker's
    # footprint is the one-worker server's (master + worker: what a worker needs in all, PSS), and each
    # further worker adds its private pages (USS) - the index is mapped, so its pages are the page cache's.
    one, many = results["gunicorn-1"], results["gunicorn"]
    first = one["master"]["pss"] + sum(m["pss"] for m in one["memory"])
    results["worker_uss_over_first"] = [m["uss"] / first for m in many["memory"]]
    results["worker_dirty_over_first"] = [m["dirty"] / first for m in many["memory"]]
    results["first_pss"] = first
    return {**results["uvicorn"], **{k: v for k, v in results.items() if k != "uvicorn"}}


def serve(n: int, server: str, workers: int, raw: str, asked: list[str]) -> dict:
    import httpx

    port = free_port()  # not a fixed one: other worktrees run this bench on the same machine
    env = {
        **os.environ,
        "EMBED_BACKEND": "local",
        "WEB_CONCURRENCY": str(workers),
        "WEB_BIND": f"127.0.0.1:{port}",
    }
    if server == "uvicorn":
        command = [
            sys.executable,
            "-m",
            "uvicorn",
            "config.asgi:application",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--workers",
            str(workers),
            "--log-level",
            "warning",
        ]
    else:
        command = [
            sys.executable,
            "-m",
            "gunicorn",
            "-c",
            "python:config.gunicorn_conf",
            "--log-level",
            "warning",
        ]
    log = WORK / f"http-{n}-{server}.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=sink)
    url = f"http://127.0.0.1:{port}/api/v1/collections/scale/search"
    headers = {"Authorization": f"Bearer {raw}"}
    try:
        deadline = time.time() + 180
        while True:
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/v1/collections/", headers=headers, timeout=2)
                break
            except httpx.HTTPError:
                if process.poll() is not None or time.time() > deadline:
                    raise SystemExit(
                        f"the {server} server did not come up; its log ends:\n{log.read_text()[-3000:]}"
                    ) from None
                time.sleep(0.5)
        # Warm every worker (model load, index map) before the timed phase.
        warm_started = time.perf_counter()
        for q in asked[: 4 * workers]:
            httpx.post(
                url,
                json={"question": q, "most": 10, "around": 0, "min_score": 0},
                headers=headers,
                timeout=120,
            )
        warm = time.perf_counter() - warm_started
        latencies, errors = [], []
        stop = time.time() + 15

        def client(offset):
            with httpx.Client(headers=headers, timeout=30) as session:
                i = offset
                while time.time() < stop:
                    started = time.perf_counter()
                    response = session.post(
                        url, json={"question": asked[i % len(asked)], "most": 10, "around": 0, "min_score": 0}
                    )
                    latencies.append(time.perf_counter() - started)
                    if response.status_code != 200:
                        errors.append(response.status_code)
                    i += 4

        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        memory = [smaps(pid) for pid in descendants(process.pid)]
        return {
            "server": server,
            "workers": workers,
            "requests_per_s": len(latencies) / 15,
            "p50_ms": percentile(latencies, 50),
            "p95_ms": percentile(latencies, 95),
            "errors": len(errors),
            "warm_s": warm,
            "memory": memory,
            "master": smaps(process.pid),
        }
    finally:
        process.terminate()
        process.wait(timeout=30)


def http_lines(h: dict) -> list[str]:
    def mib(m):
        dirty = f" (dirty {m['dirty'] / 2**20:.0f})" if "dirty" in m else ""
        return (
            f"RSS {m['rss'] / 2**20:.0f} / PSS {m['pss'] / 2**20:.0f} / USS {m['uss'] / 2**20:.0f}{dirty} MiB"
        )

    lines = []
    # Before 2026-12-02 the HTTP phase ran uvicorn only, and its figures sit at the top level.
    for name, run in (("uvicorn", h), ("gunicorn", h.get("gunicorn")), ("gunicorn-1", h.get("gunicorn-1"))):
        if not run:
            continue
        master = f" Master: {mib(run['master'])}." if name != "uvicorn" and "master" in run else ""
        lines.append(
            f"\nHTTP, {run['workers']} {name.removesuffix('-1')} worker{'s' if run['workers'] > 1 else ''}, "
            f"4 clients, question embedded by the server: {run['requests_per_s']:.1f} req/s, p50 "
            f"{run['p50_ms']:.1f} ms, p95 {run['p95_ms']:.1f} ms, {run['errors']} errors. Workers: "
            f"{'; '.join(mib(m) for m in run['memory'])}.{master}"
        )
    if "worker_uss_over_first" in h:
        lines.append(
            "\nA gunicorn worker's private memory (USS) against the first worker's footprint (the "
            "one-worker "
            f"server's PSS, master included, {h['first_pss'] / 2**20:.0f} MiB): "
            + ", ".join(f"{r:.1%}" for r in h["worker_uss_over_first"])
            + "; its private dirty memory "
            "(what it wrote, not the index pages only it has read): "
            + ", ".join(f"{r:.1%}" for r in h.get("worker_dirty_over_first", []))
            + "."
        )
    return lines
