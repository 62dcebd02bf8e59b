"""Memory recall on LoCoMo's development split, over HTTP, against plain baselines in the same run.

    python bench/memory/memory_locomo.py [--data ../shared/datasets/locomo-dev] [--sweep] [--reuse]

LoCoMo (Maharana et al., ACL 2024): long conversations between two speakers, questions with the
turns that hold their evidence. Each session of a conversation is stored as one episode (a first
line with its date, then one line per turn, ``Speaker: text``) of one agent per conversation,
through ``POST /api/v1/memory/episodes`` of a real gunicorn server with a django-q2 cluster
building the nodes as the stores go in. When every node is built (``GET /health``), every
question of categories 1-4 is recalled over HTTP at each character budget (1k, 2k, 4k, 8k, with
``most`` 50) and at each ``most`` (1, 3, 5, 10, with no budget that binds), and once as an agent
would by default (``most`` 5, the default budget), which is what the latency figures time.

Evidence recall: the share of a question's evidence turns whose text lies inside one returned
excerpt; all-evidence: the share of questions with every evidence turn inside. Evidence ids are
cleaned as SOURCE.md says ("D8:6; D9:17" is two ids, "D:11:26" is D11:26, "D30:05" is D30:5);
an id naming no turn is dropped, and a question left with none is not asked.

Baselines, in this process over the same texts: bm25s (its own BM25 and English stop words),
MiniLM (the project's embedder, cosine) and their hybrid (each min-max normalised over the
conversation, then averaged), each over single turns and over windows of consecutive turns packed
to the mean node length the server built. They are quoted by the same selection as ragsite
(``memory_app.excerpts.select``: best first, units that touch merged, the last one cut at a
sentence), so a budget means the same characters for every method.

``--sweep``: after the HTTP run, ragsite's recall again in this process over the same store, for
several fusion weights and length normalisations: what chose ``conf.RECALL_FUSION_WEIGHT``.

The store is a scratch SQLite file under data/bench/ (``--reuse`` keeps it and skips storing).
The machine is shared: timings are what this run saw, not a capacity.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "memory"))
WORK = ROOT / "data" / "bench"
RESULTS = ROOT / "bench" / "results" / "memory_locomo.json"
PLOT = ROOT / "docs" / "img" / "memory-locomo.png"

from locomo_baselines import baselines  # noqa: E402
from locomo_data import (  # noqa: E402
    CATEGORIES,
    NoData,
    Tally,
    default_folder,
    found,
    load,
    percentile,
    settings_asked,
)
from locomo_report import plot, report  # noqa: E402
from locomo_sweep import SWEEP_EXPONENTS, SWEEP_WEIGHTS, parse_variant, summary, sweep  # noqa: E402

from bench.common.results import provenance  # noqa: E402

# --- The server ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(command: list[str], env: dict, log: Path) -> subprocess.Popen:
    with open(log, "wb") as sink:
        return subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)


def store_all(conversations, base: str, keys: dict[str, str], facts: dict) -> None:
    """Every session as one episode, in order, timing each POST while the cluster builds nodes."""
    import httpx

    latencies = []
    started = time.perf_counter()
    for conversation in conversations:
        with httpx.Client(headers={"Authorization": f"Bearer {keys[conversation.name]}"}, timeout=60) as http:
            for session in conversation.sessions:
                began = time.perf_counter()
                response = http.post(f"{base}/api/v1/memory/episodes", json={"text": session.text})
                latencies.append(time.perf_counter() - began)
                response.raise_for_status()
                session.record_id = response.json()["id"]
    facts["store"] = {
        "records": len(latencies),
        "seconds": time.perf_counter() - started,
        "p50_ms": 1000 * percentile(latencies, 50),
        "p95_ms": 1000 * percentile(latencies, 95),
        "chars": sum(len(s.text) for c in conversations for s in c.sessions),
    }
    facts["store"]["records_per_s"] = len(latencies) / facts["store"]["seconds"]


def await_nodes(
    conversations, base: str, keys: dict[str, str], facts: dict, began: float, limit: float
) -> None:
    import httpx

    while True:
        missing = 0
        for conversation in conversations:
            report = httpx.get(
                f"{base}/api/v1/memory/health",
                timeout=60,
                headers={"Authorization": f"Bearer {keys[conversation.name]}"},
            ).json()
            missing += report["missing_nodes"]
        if not missing:
            break
        if time.perf_counter() - began > limit:
            raise SystemExit(f"{missing} records still without nodes after {limit:.0f} s")
        time.sleep(1)
    facts["nodes_ready_s"] = time.perf_counter() - began


def read_nodes(conversations, base: str, keys: dict[str, str], facts: dict) -> None:
    import httpx

    lengths = []
    for conversation in conversations:
        headers = {"Authorization": f"Bearer {keys[conversation.name]}"}
        for session in conversation.sessions:
            body = httpx.get(
                f"{base}/api/v1/memory/records/ep/{session.record_id}", headers=headers, timeout=60
            ).json()
            lengths += [n["end"] - n["start"] for n in body["nodes"]["items"]]
            if not body["nodes"]["items"]:
                lengths.append(len(session.text))
    facts["nodes"] = len(lengths)
    facts["node_chars_mean"] = statistics.mean(lengths)
    facts["nodes_per_s"] = len(lengths) / facts["nodes_ready_s"]


def recall_all(conversations, base: str, keys: dict[str, str], tally: Tally, facts: dict) -> None:
    import httpx

    latencies = []
    for conversation in conversations:
        with httpx.Client(headers={"Authorization": f"Bearer {keys[conversation.name]}"}, timeout=60) as http:
            for question in conversation.questions:
                for name, most, max_chars in settings_asked():
                    body = http.post(
                        f"{base}/api/v1/memory/recall",
                        json={"question": question.question, "most": most, "max_chars": max_chars},
                    )
                    body.raise_for_status()
                    tally.add(
                        "ragsite",
                        name,
                        question.category,
                        found(conversation, question, body.json()["excerpts"]),
                        conversation.name,
                    )
                began = time.perf_counter()
                response = http.post(
                    f"{base}/api/v1/memory/recall", json={"question": question.question, "most": 5}
                )
                latencies.append(time.perf_counter() - began)
                response.raise_for_status()
    facts["recall"] = {
        "questions": len(latencies),
        "p50_ms": 1000 * percentile(latencies, 50),
        "p95_ms": 1000 * percentile(latencies, 95),
    }


def recall_under_load(conversations, base: str, keys: dict[str, str], facts: dict, clients: int = 4) -> None:
    """Every question again at most 5 (the default budget), from `clients` threads at once: p50/p95 of
    each recall while the others run (the server has one worker process; its threads share the cores)."""
    from concurrent.futures import ThreadPoolExecutor

    import httpx

    asks = [(c.name, q.question) for c in conversations for q in c.questions]

    def ask(chunk: list[tuple[str, str]]) -> list[float]:
        times = []
        with httpx.Client(timeout=60) as http:
            for name, question in chunk:
                began = time.perf_counter()
                response = http.post(
                    f"{base}/api/v1/memory/recall",
                    json={"question": question, "most": 5},
                    headers={"Authorization": f"Bearer {keys[name]}"},
                )
                times.append(time.perf_counter() - began)
                response.raise_for_status()
        return times

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        latencies = [t for times in pool.map(ask, [asks[i::clients] for i in range(clients)]) for t in times]
    seconds = time.perf_counter() - started
    facts["recall_load"] = {
        "clients": clients,
        "questions": len(latencies),
        "p50_ms": 1000 * percentile(latencies, 50),
        "p95_ms": 1000 * percentile(latencies, 95),
        "per_s": len(latencies) / seconds,
    }


def _map_records(conversations, agents: dict) -> None:
    """The episode ids of an earlier run's store, session by session (they were stored in order)."""
    from memory_app.models import Episode

    for conversation in conversations:
        ids = list(
            Episode.objects.filter(agent=agents[conversation.name])
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        for session, pk in zip(conversation.sessions, ids, strict=True):
            session.record_id = pk


def server_env(database: str, **extra: str) -> dict[str, str]:
    """The environment of the bench's throw-away server on ``database`` (one web worker, the local model,
    the ORM broker: no REDIS_URL), with ``extra`` on top; this process's Django is pointed at the same
    store, so it can read what the server wrote."""
    env = {
        **os.environ,
        "DATABASE_URL": database,
        "EMBED_BACKEND": "local",
        "LOG_LEVEL": "WARNING",
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "WEB_CONCURRENCY": "1",
        "DATA_DIR": str(WORK / "memory-locomo-data"),
        # A throw-away server on 127.0.0.1: a key of its own, made for this run.
        "SECRET_KEY": os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50),
        **extra,
    }
    env.pop("REDIS_URL", None)
    shared = ("DATABASE_URL", "EMBED_BACKEND", "LOG_LEVEL", "DJANGO_SETTINGS_MODULE", "DATA_DIR", *extra)
    os.environ.update({k: env[k] for k in shared})
    os.environ.pop("REDIS_URL", None)
    return env


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=default_folder(ROOT),
        help="LoCoMo's development conversations (default: shared/datasets/locomo-dev beside the repository "
        "or a folder above it)",
    )
    parser.add_argument("--store", type=Path, default=WORK / "memory-locomo.sqlite3")
    parser.add_argument("--sweep", action="store_true", help="also sweep the fusion weight in this process")
    parser.add_argument(
        "--weights", type=float, nargs="*", help="the sweep's fusion weights (default: SWEEP_WEIGHTS)"
    )
    parser.add_argument("--exponents", type=float, nargs="*", help="the sweep's length exponents")
    parser.add_argument(
        "--variant",
        action="append",
        default=[],
        help="instead of the weights: 'NAME=value;NAME=value' of memory_app.conf, repeatable ('' = defaults)",
    )
    parser.add_argument(
        "--only-sweep",
        action="store_true",
        help="the sweep alone, over the store of an earlier run (implies --reuse)",
    )
    parser.add_argument("--reuse", action="store_true", help="keep the store of an earlier run: skip storing")
    parser.add_argument("--node-timeout", type=float, default=1800)
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument(
        "--conversations", type=int, default=None, help="only the first N (a smaller run, to check it works)"
    )
    parser.add_argument("--json", type=Path, default=RESULTS, help="where the figures go")
    parser.add_argument("--sweep-json", type=Path, default=None, help="--only-sweep: where its figures go")
    args = parser.parse_args()
    args.reuse = args.reuse or args.only_sweep

    try:
        conversations = load(args.data)[: args.conversations]
    except NoData as exc:
        raise SystemExit(str(exc)) from None
    if not conversations:
        raise SystemExit(f"--conversations {args.conversations} leaves no conversation to ask")
    questions = sum(len(c.questions) for c in conversations)
    WORK.mkdir(parents=True, exist_ok=True)
    if not args.reuse:
        for suffix in ("", "-wal", "-shm"):
            Path(f"{args.store}{suffix}").unlink(missing_ok=True)
    env = server_env(f"sqlite:///{args.store}", Q_WORKERS="1")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from bench.common.embedding_cache import install

    # this process only (baselines, sweep): a rerun embeds no text twice; the server embeds for itself
    install()
    from collections_app.models import Agent
    from collections_app.services.agents import create_agent, issue_key

    keys, agents = {}, {}
    for conversation in conversations:
        agent = Agent.objects.filter(agent_id=f"locomo-{conversation.name}").first()
        if agent is None:
            agent = create_agent(agent_id=f"locomo-{conversation.name}")[0]
        issued = issue_key(agent=agent)
        keys[conversation.name] = issued[1] if isinstance(issued, tuple) else issued
        agents[conversation.name] = agent

    variants = [parse_variant(v) for v in args.variant] or [
        {"RECALL_FUSION_WEIGHT": w, "EXCERPT_LENGTH_EXPONENT": e}
        for w in args.weights or SWEEP_WEIGHTS
        for e in args.exponents or SWEEP_EXPONENTS
    ]
    if args.only_sweep:
        _map_records(conversations, agents)
        from memory_app.models import RecordNode

        node_chars = statistics.mean(
            end - start
            for start, end in RecordNode.objects.filter(
                parent_kind="ep", parent_id__in=[s.record_id for c in conversations for s in c.sessions]
            ).values_list("start_char", "end_char")
        )
        baseline = Tally()
        baselines(conversations, baseline, node_chars, {})
        output = sweep(conversations, agents, variants, baseline)
        if args.sweep_json:
            args.sweep_json.write_text(json.dumps(output, indent=1))
        return
    facts: dict = {"machine": "2 cores shared with other agents' work", "questions": questions}
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start(
        [sys.executable, "-m", "gunicorn", "-c", "python:config.gunicorn_conf", "--log-level", "warning"],
        {**env, "WEB_BIND": f"127.0.0.1:{port}"},
        WORK / "memory-locomo-server.log",
    )
    cluster = start([sys.executable, "manage.py", "qcluster"], env, WORK / "memory-locomo-cluster.log")
    tally = Tally()
    try:
        import httpx

        deadline = time.time() + 180
        while True:
            try:
                httpx.get(
                    f"{base}/api/v1/memory/health",
                    headers={"Authorization": f"Bearer {keys[conversations[0].name]}"},
                    timeout=5,
                ).raise_for_status()
                break
            except httpx.HTTPError:
                if server.poll() is not None or time.time() > deadline:
                    raise SystemExit(
                        "the server did not come up; see data/bench/memory-locomo-server.log"
                    ) from None
                time.sleep(0.5)
        began = time.perf_counter()
        if args.reuse:
            _map_records(conversations, agents)
        else:
            store_all(conversations, base, keys, facts)
        await_nodes(conversations, base, keys, facts, began, args.node_timeout)
        read_nodes(conversations, base, keys, facts)
        print(f"stored and divided: {facts}", flush=True)
        recall_all(conversations, base, keys, tally, facts)
        recall_under_load(conversations, base, keys, facts)
    finally:
        stop(server)
        stop(cluster)
    baselines(conversations, tally, facts["node_chars_mean"], facts)
    lines = report(tally, facts, questions)
    print("\n".join(lines))
    output = {
        "provenance": provenance(),
        "facts": facts,
        "figures": {
            f"{m} | {n}": tally.figures(m, n) for m in tally.methods() for n, _mo, _c in settings_asked()
        },
        "margins": summary(tally, [name for name, _m, _c in settings_asked()]),
        "by_category": {
            f"{m} | {n} | {c}": tally.figures(m, n, c)[0]
            for m in tally.methods()
            for n, _mo, _c in settings_asked()
            for c in CATEGORIES
        },
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(output, indent=1))
    if not args.no_plot:
        plot(tally, PLOT)
    if args.sweep:
        output["sweep"] = sweep(conversations, agents, variants, tally)
        args.json.write_text(json.dumps(output, indent=1))


if __name__ == "__main__":
    main()
