"""Recall latency alone, over HTTP, at ``most`` 5, on the store ``bench/memory_locomo.py`` left.

    python bench/memory_latency.py [--n 300] [--against DIR] [--steps]

No storing, no node building: the store of an earlier ``memory_locomo.py`` run (data/bench/) is
served by a real gunicorn (one worker, as there) and LoCoMo's dev questions are recalled in turn,
each timed from the client. ``--against DIR`` serves the same store from another checkout of the
code as well (say, the branch before a change) and sends each question to both servers in turn,
alternating which goes first, so both see the same load window: a before/after on one store.

``--steps``: also, in this process, the per-step cost of one recall (wall and this thread's CPU),
the statements it runs, and the embedder's cost for one question at 1 and 2 threads.

The machine is shared: every figure is printed with the load average (``uptime``) beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from locomo_data import load  # noqa: E402
from memory_locomo import DATA, WORK, free_port, server_env, stop  # noqa: E402


def load_average() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def percentiles(values: list[float]) -> dict:
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered) * 1000, 1),
        "p95_ms": round(ordered[int(0.95 * (len(ordered) - 1))] * 1000, 1),
        "min_ms": round(ordered[0] * 1000, 1),
    }


def serve(code: Path, env: dict, log: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "-c",
                "python:config.gunicorn_conf",
                "--log-level",
                "warning",
            ],
            cwd=code,
            env={**env, "WEB_BIND": f"127.0.0.1:{port}", "PYTHONPATH": str(code)},
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return process, f"http://127.0.0.1:{port}"


def wait_up(process: subprocess.Popen, base: str, key: str) -> None:
    import httpx

    deadline = time.time() + 180
    while True:
        try:
            httpx.get(
                f"{base}/api/v1/memory/health", headers={"Authorization": f"Bearer {key}"}, timeout=5
            ).raise_for_status()
            return
        except httpx.HTTPError:
            if process.poll() is not None or time.time() > deadline:
                raise SystemExit(f"the server at {base} did not come up") from None
            time.sleep(0.5)


def over_http(servers: dict[str, str], asked: list[tuple[str, str]], keys: dict[str, str]) -> dict:
    """Each question to every server in turn (alternating who goes first), timed at the client;
    after each, the floor (see below)."""
    import httpx

    times: dict[str, list[float]] = {n: [] for name in servers for n in (name, f"{name}: floor")}
    clients = {
        (name, conv): httpx.Client(headers={"Authorization": f"Bearer {key}"}, timeout=60)
        for name in servers
        for conv, key in keys.items()
    }
    loads = [load_average()]
    order = list(servers)
    for number, (conv, question) in enumerate([asked[0]] * 3 + asked):  # three to warm up
        for name in order if number % 2 else reversed(order):
            began = time.perf_counter()
            response = clients[(name, conv)].post(
                f"{servers[name]}/api/v1/memory/recall", json={"question": question, "most": 5}
            )
            took = time.perf_counter() - began
            response.raise_for_status()
            if number >= 3:
                times[name].append(took)
            # The floor: the same request refused after authentication and parsing (a blank question,
            # 400), so no index, no embedding: what HTTP, the middleware, ninja and the key cost.
            began = time.perf_counter()
            response = clients[(name, conv)].post(
                f"{servers[name]}/api/v1/memory/recall", json={"question": " ", "most": 5}
            )
            took = time.perf_counter() - began
            assert response.status_code == 400, response.status_code
            if number >= 3:
                times[f"{name}: floor"].append(took)
        if number % 100 == 0:
            loads.append(load_average())
    loads.append(load_average())
    for client in clients.values():
        client.close()
    return {"load_seen": loads, **{name: percentiles(values) for name, values in times.items()}}


def steps(asked: list[tuple[str, str]], agents: dict, keys: dict[str, str]) -> dict:
    """One recall's steps in this process: wall and thread-CPU milliseconds (medians), statements."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from collections_app.services.agents import authenticate
    from memory_app.services.common import recall_generation
    from memory_app.services.recall import recall
    from ragsite import embedding

    embedder = embedding.get_embedder()
    parts: dict[str, list[tuple[float, float]]] = {}

    def timed(name, call):
        wall, cpu = time.perf_counter(), time.thread_time()
        value = call()
        parts.setdefault(name, []).append((time.perf_counter() - wall, time.thread_time() - cpu))
        return value

    statements = []
    for conv, question in asked[:3] + asked:
        timed("authenticate", lambda conv=conv: authenticate(keys[conv]))
        timed("recall generation read", lambda conv=conv: recall_generation(agents[conv].pk))
        timed("embed the question", lambda q=question: embedder.embed([q]))
        with CaptureQueriesContext(connection) as queries:
            answer = timed(
                "recall (whole service)",
                lambda conv=conv, q=question: recall(agent=agents[conv], query=q, most=5),
            )
        statements.append(len(queries))
        timed("JSON of the answer", lambda answer=answer: json.dumps(answer))
    out = {
        name: {
            "wall_ms": round(statistics.median(w for w, _ in values[3:]) * 1000, 2),
            "cpu_ms": round(statistics.median(c for _, c in values[3:]) * 1000, 2),
        }
        for name, values in parts.items()
    }
    out["statements per recall"] = statistics.median(statements[3:])
    out["load"] = load_average()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--store", type=Path, default=WORK / "memory-locomo.sqlite3")
    parser.add_argument(
        "--database", help="serve this database instead (say, PostgreSQL loaded with the store's dumpdata)"
    )
    parser.add_argument("--n", type=int, default=300, help="questions recalled (per server)")
    parser.add_argument("--against", type=Path, help="another checkout of the code, served too")
    parser.add_argument("--steps", action="store_true", help="the per-step cost in this process too")
    parser.add_argument("--no-http", action="store_true")
    parser.add_argument(
        "--cluster", action="store_true", help="a django-q2 cluster running beside, as memory_locomo.py has"
    )
    parser.add_argument("--out", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args()
    if not args.database and not args.store.exists():
        raise SystemExit(f"no store at {args.store}: run bench/memory_locomo.py first")

    conversations = load(args.data)
    asked = [(c.name, q.question) for c in conversations for q in c.questions if q.category in (1, 2, 3, 4)]
    # Round robin over the conversations, so every agent's index is asked about in turn.
    asked = sorted(asked, key=lambda cq: [c.name for c in conversations].index(cq[0]))
    by_conv = {c.name: [q for n, q in asked if n == c.name] for c in conversations}
    asked = [
        (name, qs[i])
        for i in range(max(map(len, by_conv.values())))
        for name, qs in by_conv.items()
        if i < len(qs)
    ][: args.n]
    env = server_env(args.database or f"sqlite:///{args.store}")
    import django

    django.setup()
    from collections_app.models import Agent
    from collections_app.services.agents import issue_key

    agents = {c.name: Agent.objects.get(agent_id=f"locomo-{c.name}") for c in conversations}
    keys = {name: issue_key(agent=agent, name="latency bench")[1] for name, agent in agents.items()}
    result: dict = {"questions": len(asked), "load_before": load_average()}
    if not args.no_http:
        codes = {"this": ROOT, **({"against": args.against.resolve()} if args.against else {})}
        processes, servers = [], {}
        try:
            if args.cluster:
                with open(WORK / "memory-latency-cluster.log", "wb") as sink:
                    processes.append(
                        subprocess.Popen(
                            [sys.executable, "manage.py", "qcluster"],
                            cwd=ROOT,
                            env={**env, "Q_WORKERS": "1"},
                            stdout=sink,
                            stderr=subprocess.STDOUT,
                            start_new_session=True,
                        )
                    )
            for name, code in codes.items():
                process, base = serve(code, env, WORK / f"memory-latency-{name}.log")
                processes.append(process)
                servers[name] = base
            for process, base in zip(processes[-len(servers) :], servers.values(), strict=True):
                wait_up(process, base, next(iter(keys.values())))
            result["http"] = over_http(servers, asked, keys)
        finally:
            for process in processes:
                stop(process)
    if args.steps:
        result["steps"] = steps(asked, agents, keys)
    print(json.dumps(result, indent=1))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
