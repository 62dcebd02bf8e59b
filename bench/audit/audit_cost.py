"""What the read audit costs a search: p50 of the whole request with the entry written, and without.

    python bench/audit/audit_cost.py [--rounds 400] [--embed hash|local]     (make bench-audit)
    DATABASE_URL=postgres://... python bench/audit/audit_cost.py             # the same on PostgreSQL

A scratch store (SQLite in a temporary folder unless DATABASE_URL names another) holds the bundled
sample handbook, built once. Each round sends the same search twice through Django's full request path
(middleware, the API, the search service, the answer's JSON): once as served, writing its audit entry,
and once with the audit's writer replaced by one that does nothing, in an order that alternates from
round to round so both see the same load. Printed: both p50s, their difference (the audit's cost,
which must stay at or under 1 ms), the ratio, and the write alone. The machine is shared: the load
average is printed beside the figures, and saved with them to bench/results/audit_cost-<store>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.common import results  # noqa: E402

QUESTIONS = [
    "how many days of annual leave carry over",
    "who approves travel",
    "what is reimbursed for mileage",
    "what to do on the first day",
    "where are the fire exits",
    "how are expenses claimed",
    "which benefits start at once",
    "when is the probation review",
]
BUDGET_MS = 1.0


def setup(work: Path, embed: str) -> None:
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{work / 'audit-bench.sqlite3'}")
    os.environ["DATA_DIR"] = str(work)
    os.environ["INDEX_DIR"] = str(work / "indexes")
    os.environ["KNOWLEDGE_ROOT"] = str(work / "knowledge")
    os.environ["EMBED_BACKEND"] = embed
    os.environ["LOG_LEVEL"] = "WARNING"
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()


def build_store(work: Path) -> str:
    from django.core.management import call_command

    from collections_app.services.agents import create_agent, create_collection
    from collections_app.services.builds import build_collection

    call_command("migrate", verbosity=0)
    agent, raw = create_agent(agent_id=f"audit-bench-{secrets.token_hex(3)}", name="audit bench")
    folder = work / "knowledge" / agent.agent_id / "handbook"
    shutil.copytree(ROOT / "collections_app" / "sample_docs", folder)
    collection = create_collection(agent=agent, name="handbook", folder="handbook")
    run = build_collection(collection=collection)
    assert run.status == "succeeded", run.error
    return raw


def measure(raw: str, rounds: int) -> dict:
    from django.test import Client

    from collections_app.models import ReadAudit
    from collections_app.services.audit import write_read
    from ragsite import audit

    client = Client()
    headers = {"Authorization": f"Bearer {raw}"}

    def search(question: str) -> float:
        body = json.dumps({"question": question, "most": 5})
        start = time.perf_counter()
        response = client.post(
            "/api/v1/collections/handbook/search", data=body, content_type="application/json", headers=headers
        )
        elapsed = time.perf_counter() - start
        assert response.status_code == 200, response.content
        return elapsed

    def run(with_audit: bool, question: str) -> float:
        audit.set_writer(write_read if with_audit else (lambda read: None))
        try:
            return search(question)
        finally:
            audit.set_writer(write_read)

    for question in QUESTIONS:  # warm: the index mapped, the embedder loaded, the statements prepared
        run(True, question)
        run(False, question)
    written_before = ReadAudit.objects.count()
    on, off = [], []
    for i in range(rounds):
        question = QUESTIONS[i % len(QUESTIONS)]
        if i % 2:
            on.append(run(True, question))
            off.append(run(False, question))
        else:
            off.append(run(False, question))
            on.append(run(True, question))
    assert ReadAudit.objects.count() - written_before == rounds  # one entry per audited search, none else
    sample = ReadAudit.objects.latest("id")
    writes = []
    for _ in range(rounds):
        read = audit.Read(
            kind=sample.kind, channel=sample.channel, agent_id=sample.agent_id, key_id=sample.key_id,
            target=sample.target, question=QUESTIONS[0], ids=sample.ids, size=sample.size,
        )  # fmt: skip
        start = time.perf_counter()
        write_read(read)
        writes.append(time.perf_counter() - start)
    return {"on": on, "off": off, "write": writes}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--embed", choices=["hash", "local"], default="hash")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="ragsite-audit-bench-"))
    try:
        setup(work, args.embed)
        from django.db import connection

        raw = build_store(work)
        times = measure(raw, args.rounds)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    p50 = {name: statistics.median(values) * 1000 for name, values in times.items()}
    cost = p50["on"] - p50["off"]
    print(f"store: {connection.vendor}; embedder: {args.embed}; rounds: {args.rounds}")
    print(f"load average: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"search p50 with the audit entry:    {p50['on']:.3f} ms")
    print(f"search p50 without it:              {p50['off']:.3f} ms")
    print(f"the audit's cost (p50 difference):  {cost:.3f} ms (budget {BUDGET_MS:.1f} ms)")
    print(f"ratio with/without:                 {p50['on'] / p50['off']:.3f}")
    print(f"the entry's INSERT alone, p50:      {p50['write']:.3f} ms")
    figures = {
        "store": connection.vendor,
        "embedder": args.embed,
        "rounds": args.rounds,
        "p50_ms": {
            "with": round(p50["on"], 3),
            "without": round(p50["off"], 3),
            "insert": round(p50["write"], 3),
        },
        "cost_ms": round(cost, 3),
        "ratio": round(p50["on"] / p50["off"], 3),
        "budget_ms": BUDGET_MS,
    }
    print("# written to", results.save(f"audit_cost-{connection.vendor}", figures))
    return 0 if cost <= BUDGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
