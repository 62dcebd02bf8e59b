"""tools/trust_probe/probe.py's families on a store under strain (issue 24, items 7-9).

* busy - SQLite: another process holds the write lock (`BEGIN IMMEDIATE`) for 25 s, longer than the
  busy timeout (20 s), while agent A's key is due to have its use recorded. Searches (API, MCP, a
  reader's, a listing, a recall) must answer 200 before the lock is given back; writes (a memory, a
  build request, MCP's store, a record's replacement, a new collection) must answer 503 `store_busy`
  with Retry-After (MCP: a `store_busy` tool error), never 500. PostgreSQL has no store-wide write
  lock (readers never wait on writers there; a writer waits only for the rows it writes), so there
  the probe holds agent A's key row and its collection row `FOR UPDATE` for 8 s instead: searches must
  still answer before the rows are given back (the key's use is recorded with a 100 ms lock timeout).
* bigfile - a 100 MB text file, a 50 MB HTML file and a DOCX bomb, each built (beside one small
  document) by a fresh process on this store: failed = the build did not succeed, the file was not
  cut or refused with its reason, the build process's peak memory grew by the bound or more
  (tests/collections/test_bounded_work.py's WORKER_GROWTH_MIB), or the extraction child reached its cap.
* diskfull - the index written on a full disk: a build in a process of its own whose collection index
  folder is a tmpfs (in a user and mount namespace: no root, nothing left mounted) holding the old
  build's index and room for none, a quarter, half or 90 % of a new one, so the kernel answers ENOSPC
  at the first file or a later one. failed = the build is not recorded failed, the previous build
  stops answering (there, or from the real folder over HTTP), or a scratch index is left behind;
  leaked = a deployment path in the build record. Then a build with space succeeds and answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

from tools.trust_probe.world import Tally, http_client

ROOT = Path(__file__).resolve().parents[2]
HOLD_SECONDS = 25
HOLD_SQLITE = """
import sqlite3, sys, time
store = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
store.execute("BEGIN IMMEDIATE")
print("held", flush=True)
time.sleep(float(sys.argv[2]))
store.execute("ROLLBACK")
"""


def _busy_requests(base: str, world: dict) -> tuple[list, list]:
    """(name, method, path, body) of the reads that must answer and the writes that must say retry."""
    mcp = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    reads = [
        ("search", "post", "/api/v1/collections/alpha/search", {"question": "carry-over days"}),
        (
            "reader's search",
            "post",
            "/api/v1/collections/labelled/search",
            {"question": "leave policy", "reader": "alice@example.com"},
        ),
        (
            "MCP search",
            "post",
            "/mcp",
            {
                **mcp,
                "params": {
                    "name": "search",
                    "arguments": {"collection": "alpha", "question": "carry-over days"},
                },
            },
        ),
        ("listing", "get", "/api/v1/collections/", None),
        ("recall", "post", "/api/v1/memory/recall", {"query": "vault code"}),
    ]
    writes = [
        ("memory store", "post", "/api/v1/memory/memories", {"text": "The badge office opens at nine."}),
        ("build request", "post", "/api/v1/collections/alpha/build", {}),
        (
            "MCP store",
            "post",
            "/mcp",
            {**mcp, "params": {"name": "store", "arguments": {"text": "The badge office opens at nine."}}},
        ),
        ("replace", "put", f"/api/v1/memory/records/mem/{world['memory']}", {"text": "overwrite"}),
        ("new collection", "post", "/api/v1/collections", {"name": "during-the-lock"}),
    ]
    return reads, writes


def busy(tally: Tally, base: str, world: dict, database: str) -> None:
    from datetime import timedelta

    from django.db import connection
    from django.utils import timezone

    from collections_app.models import ApiKey, Collection

    # Due: the next request is the one that would record the key's use.
    ApiKey.objects.filter(agent__agent_id="agent-a").update(
        last_used_at=timezone.now() - timedelta(minutes=2)
    )
    reads, writes = _busy_requests(base, world)
    if database == "sqlite":
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_SQLITE, connection.settings_dict["NAME"], str(HOLD_SECONDS)],
            stdout=subprocess.PIPE,
            text=True,
        )
    else:
        key = ApiKey.objects.filter(agent__agent_id="agent-a").values_list("pk", flat=True).first()
        alpha = Collection.objects.get(agent__agent_id="agent-a", name="alpha").pk
        hold_pg = (
            "import psycopg, sys, time\n"
            "with psycopg.connect(sys.argv[1]) as db:\n"
            f"    db.execute('SELECT 1 FROM {ApiKey._meta.db_table} WHERE id = {key} FOR UPDATE')\n"
            f"    db.execute('SELECT 1 FROM {Collection._meta.db_table} WHERE id = {alpha} FOR UPDATE')\n"
            "    print('held', flush=True)\n"
            "    time.sleep(8)\n"
        )
        holder = subprocess.Popen(
            [sys.executable, "-c", hold_pg, os.environ["DATABASE_URL"]], stdout=subprocess.PIPE, text=True
        )
        writes = []  # PostgreSQL's writers wait for rows, not for a store-wide lock: nothing to refuse
    if holder.stdout.readline().strip() != "held":
        tally.count("busy", failed=True, note="the other writer could not take the lock")
        holder.wait(timeout=60)
        return
    answers: dict[str, tuple] = {}

    def ask(name, method, path, body):
        with http_client() as http:
            headers = {"Authorization": f"Bearer {world['a_key']}", "Accept": "application/json"}
            response = http.request(method, base + path, headers=headers, json=body)
            answers[name] = (response, holder.poll() is None)

    threads = [threading.Thread(target=ask, args=request) for request in reads + writes]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    holder.wait(timeout=120)
    for name, *_ in reads:
        response, while_held = answers.get(name, (None, False))
        error = (
            response is not None
            and name.startswith("MCP")
            and '"isError":true' in response.text.replace(" ", "")
        )
        tally.count(
            "busy",
            failed=response is None or response.status_code != 200 or error or not while_held,
            note=f"{name}: {getattr(response, 'status_code', None)} while held {while_held} "
            f"{getattr(response, 'text', '')[:100]}",
        )
    for name, *_ in writes:
        response, _held = answers.get(name, (None, False))
        if response is not None and name.startswith("MCP"):
            said = response.text.replace(" ", "")
            ok = response.status_code == 200 and '"isError":true' in said and "store_busy" in said
        else:
            ok = (
                response is not None
                and response.status_code == 503
                and bool(response.headers.get("Retry-After"))
                and '"store_busy"' in response.text
            )
        tally.count(
            "busy",
            failed=not ok,
            note=f"{name}: {getattr(response, 'status_code', None)} {getattr(response, 'text', '')[:100]}",
        )


# --- bigfile -------------------------------------------------------------------------------------


def _status_mib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) // 1024
    raise LookupError(field)


def peak_build(folder: str, name: str) -> None:
    """In a fresh process on the probe's store: build agent A's collection `name` from `folder`, and
    print the peaks (this process's before and after, the extraction child's) in MiB."""
    import resource

    import django

    os.environ[f"KNOWLEDGE_AGENT_A__{name.upper()}_FOLDER"] = folder
    django.setup()
    from collections_app.services.agents import create_collection, get_agent
    from collections_app.services.builds import build_collection
    from collections_app.services.sources import document_extractor

    collection = create_collection(agent=get_agent("agent-a"), name=name, method="structure")
    # Not ru_maxrss: Linux carries it over exec from the process that forked this one (the probe's
    # child, hundreds of MiB), which would hide the build's own peak. VmHWM is this process's own,
    # and is reset here so the peak is the build's.
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        pass  # then VmHWM counts from exec: Django's start-up, a smaller peak than any build's
    before = _status_mib("VmRSS")
    started = time.monotonic()
    run = build_collection(collection=collection, requested_by="probe")
    after = _status_mib("VmHWM")
    document_extractor().close()  # waited for, so its peak is counted in RUSAGE_CHILDREN
    child = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
    print(
        json.dumps(
            {
                "status": run.status,
                "read": run.documents_read,
                "refused": run.refused,
                "warnings": run.warnings,
                "error": run.error,
                "before_mib": before,
                "peak_mib": after,
                "child_peak_mib": child,
                "seconds": round(time.monotonic() - started, 1),
            }
        )
    )


def bigfile(tally: Tally, scratch: Path) -> None:
    from tests.collections.test_bounded_work import WORKER_GROWTH_MIB, write_bomb, write_html, write_text

    cap = int(os.environ.get("EXTRACT_MEMORY_MB", "1024"))
    cases = [
        ("bigtext", write_text, "big.txt", "only its first"),
        ("bightml", write_html, "big.html", "only its first"),
        ("bigbomb", write_bomb, "bomb.docx", "bomb.docx was refused"),
    ]
    for name, make, file, said in cases:
        folder = scratch / "deployment-secret-folder" / name
        folder.mkdir(parents=True)
        (folder / "small.md").write_text("# Small\n\nThe canteen opens at eight.\n")
        make(folder)
        megabytes = (folder / file).stat().st_size / 1e6
        env = {**os.environ, "EXTRACT_TIMEOUT": "300"}  # memory is measured here, not a busy machine's speed
        done = subprocess.run(
            [sys.executable, "-m", "tools.trust_probe.store", "--peak", str(folder), name],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        for path in folder.iterdir():
            path.unlink()
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            tally.count("bigfile", failed=True, note=f"{file}: the build process failed {done.stderr[-300:]}")
            continue
        out = json.loads(lines[-1])
        growth = out["peak_mib"] - out["before_mib"]
        record = json.dumps([out["warnings"], out["error"], out["refused"]])
        tally.count(
            "bigfile",
            failed=out["status"] != "succeeded"
            or not any(said in w for w in out["warnings"])
            or growth >= WORKER_GROWTH_MIB
            or out["child_peak_mib"] >= cap,
            leaked=str(scratch) in record,
            note=f"{file} ({megabytes:.0f} MB): {out['status']}, worker +{growth} MiB, child "
            f"{out['child_peak_mib']} MiB, {out['seconds']} s, {out['warnings'][:2]}",
        )
        tally["bigfile"].setdefault("peaks", []).append(
            f"{file} {megabytes:.0f} MB: worker +{growth} MiB (peak {out['peak_mib']}), "
            f"extraction child {out['child_peak_mib']} MiB, {out['seconds']} s"
        )


# --- diskfull ------------------------------------------------------------------------------------


PAGE = 4096


def _pages(folder: Path) -> int:
    """Bytes `folder`'s files take on tmpfs (whole pages)."""
    return sum(-(-path.stat().st_size // PAGE) * PAGE for path in folder.rglob("*") if path.is_file())


def full_build() -> None:
    """Inside a mount namespace whose INDEX_DIR/c<pk> is a tiny tmpfs holding the old build's index:
    build agent A's `disk`, then ask it; print what happened."""
    import shutil

    import django

    django.setup()
    from django.conf import settings

    from collections_app.services import indexes
    from collections_app.services.agents import get_agent
    from collections_app.services.builds import build_collection
    from collections_app.services.search import search_collection

    agent = get_agent("agent-a")
    from collections_app.models import Collection

    collection = Collection.objects.get(agent=agent, name="disk")
    where = Path(settings.INDEX_DIR) / f"c{collection.pk}"
    free = shutil.disk_usage(where).free
    run = build_collection(collection=collection)
    indexes.forget(collection.pk)
    try:
        found = search_collection(agent=agent, collection="disk", question="carry-over days", min_score=0)
        said = " ".join(p["text"] for p in found["paragraphs"])
    except Exception as exc:  # reported, not raised: the old build must answer
        said = f"{type(exc).__name__}: {exc}"
    print(
        json.dumps(
            {
                "status": run.status,
                "error": run.error,
                "warnings": run.warnings,
                "free": free,
                "answer": said[:200],
                "left": sorted(p.name for p in where.iterdir() if ".tmp" in p.name),
            }
        )
    )


def diskfull(tally: Tally, base: str, world: dict, scratch: Path, quick: bool) -> None:
    from django.conf import settings

    from collections_app.models import BuildRun, CollectionBuilt
    from collections_app.services import indexes
    from collections_app.services.agents import create_collection, get_agent
    from collections_app.services.builds import build_collection

    folder = scratch / "deployment-secret-folder" / "disk"
    folder.mkdir(parents=True)
    (folder / "a.md").write_text("# Leave\n\nCarry-over is capped at five days a year.\n")
    os.environ["KNOWLEDGE_AGENT_A__DISK_FOLDER"] = str(folder)
    collection = create_collection(agent=get_agent("agent-a"), name="disk", method="fixed")
    first = build_collection(collection=collection)
    tally.count(
        "diskfull", failed=first.status != BuildRun.SUCCEEDED, note=f"the first build: {first.status}"
    )
    built_at = CollectionBuilt.objects.get(collection=collection).built_at
    (folder / "a.md").write_text("# Leave\n\nCarry-over is capped at ten days a year.\n")
    index_dir = Path(settings.INDEX_DIR) / f"c{collection.pk}"
    used = _pages(index_dir)

    def ask() -> str:
        with http_client() as http:
            answer = http.post(
                f"{base}/api/v1/collections/disk/search",
                headers={"Authorization": f"Bearer {world['a_key']}"},
                json={"question": "carry-over days", "min_score": 0},
            )
        return answer.text if answer.status_code == 200 else f"{answer.status_code} {answer.text[:100]}"

    # A tmpfs just big enough for the old index and a share of a new one, over the collection's index
    # folder, in a user and mount namespace of its own: real ENOSPC, no mount left behind, no root.
    for share in (0, 0.5) if quick else (0, 0.25, 0.5, 0.9):
        size = used + int(used * share) // PAGE * PAGE
        stage = scratch / f"stage{share}"
        script = (
            'cp -a "$1" "$2" && mount -t tmpfs -o size="$3" tmpfs "$1" && cp -a "$2/." "$1/" '
            '&& exec "$4" -m tools.trust_probe.store --full'
        )
        done = subprocess.run(
            [
                "unshare",
                "-rm",
                "sh",
                "-c",
                script,
                "sh",
                str(index_dir),
                str(stage),
                str(size),
                sys.executable,
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            tally.count("diskfull", failed=True, note=f"no tiny filesystem: {done.stderr[-300:]}")
            continue
        out = json.loads(lines[-1])
        indexes.forget(collection.pk)
        answer = ask()  # from the store's real index folder, which the full one hid
        still = CollectionBuilt.objects.get(collection=collection).built_at == built_at
        tally.count(
            "diskfull",
            failed=out["status"] != BuildRun.FAILED
            or "five days" not in out["answer"]
            or "five days" not in answer
            or not still
            or bool(out["left"]),
            leaked=str(scratch) in json.dumps([out["error"], out["warnings"]]),
            note=f"{out['free']} bytes free of {size}: build {out['status']} {out['error'][:100]!r}, "
            f"answers {out['answer'][:50]!r}, HTTP old {'five days' in answer}, scratch left {out['left']}",
        )
    run = build_collection(collection=collection)
    indexes.forget(collection.pk)
    answer = ask()
    tally.count(
        "diskfull",
        failed=run.status != BuildRun.SUCCEEDED or "ten days" not in answer,
        note=f"with space again: build {run.status}, answers {answer[:120]!r}",
    )


if __name__ == "__main__" and sys.argv[1:2] == ["--peak"]:
    peak_build(sys.argv[2], sys.argv[3])
if __name__ == "__main__" and sys.argv[1:2] == ["--full"]:
    full_build()
