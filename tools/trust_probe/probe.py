"""The trust probe, reproducible: tried / failed / leaked per probe family, on SQLite and PostgreSQL.

    python tools/trust_probe/probe.py [--quick]
    python tools/trust_probe/probe.py --postgres postgres://postgres@127.0.0.1:5432/ragsite_trust_bench

Each database runs in a child process of its own (Django's settings are per process): a
throw-away store (a SQLite file in a temporary folder; a PostgreSQL database created and
dropped), migrated from scratch, served over HTTP on 127.0.0.1 only by a threaded WSGI server in
that process. The embedder is the deterministic `hash` backend: this measures trust, not
ranking quality. Bounded: a few minutes per database with --quick (busy holds a lock 25 s,
bigfile builds 150 MB), about twice that without.

Families (the 2026-12-01 review's, where this branch answers them):

* isolation - agent B's key against agent A's collections, memories and nodes: every answer
  must be byte-identical to the answer for a missing object. leaked = an answer holding A's text.
* oracles - `onBehalfOf` naming another agent vs nobody, `reader` naming a known vs an unknown
  reader: leaked = a pair of answers that differ.
* overlap - reader alice (label pub) searches a per-reader collection whose structure pieces
  alternate pub/secret with overlap, over questions x around x floor x most: leaked = an answer
  holding 20 or more characters that only secret pieces hold.
* ids, scores, wideoverlap (issue 24, items 2-4) - tools/trust_probe/twin.py: alice's answers from a
  per-reader collection against its twin with the hidden paragraphs deleted (ids: texts, passages,
  chunk ids, first/last; scores: the whole answer), and overlap up to 90 % of the size.
* legacyvar, edit, floor (items 1, 5, 6) - tools/trust_probe/tenancy.py: an agent-less folder variable
  and another agent's same name, a label across an edit next to it, the floor per reader.
* bodies - oversized, nested, NaN, lone-surrogate, NUL, non-UTF-8 and wrongly typed bodies on
  every surface (API, MCP, embedding endpoints) and unknown routes: failed = a 5xx, or HTML
  under /api/ or on the embedding endpoints.
* files - a build over a zip-bomb DOCX, a looping PDF, a sparse 200 MB file, a non-UTF-8 name,
  a 600-character path, a log-forging name, zip bombs of PPTX, XLSX, EPUB and ODT, and an ODP
  nested 50,000 deep: failed = the build failed, a file not refused,
  or the build over 60 s; leaked = a deployment path in the build record or an API answer.
* stale - a build the sweep failed while it ran, and a newer build that succeeded meanwhile:
  leaked = the stale build committed (its text answers, or its history says succeeded).
* secrets - `manage.py check` and the WSGI entry point with DEBUG off and no SECRET_KEY:
  failed = either starts.
* busy, bigfile, diskfull (items 7-9) - tools/trust_probe/store.py: a store whose write lock another
  process holds (on PostgreSQL: rows), a 100 MB text, a 50 MB HTML and a DOCX bomb (the build
  process's peak memory), an index written to a full (tiny, namespaced tmpfs) disk.
* numbers, partial, conflicts (issue 39) - tools/trust_probe/hostile_numbers.py and lifecycle.py: huge and
  non-finite numbers in every number a client sends (API, /v1, MCP, paths) and in a synced sidecar;
  files copied slowly into a synced folder beside temporary names; new and changed files that
  contradict a live document of a per-reader collection, for each reader on the API, MCP and /v1.
* rls (PostgreSQL only) - deliberately unfiltered queries on every agent-scoped table inside
  agent B's row-level-security scope (a request's, and inside B's build task and node-building
  task as a worker runs them): leaked = a row of agent A.

Every family is counted as tried, held (neither failed nor leaked), failed and leaked; `--families`
runs a subset, `--json` keeps the figures and notes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

# After ROOT joins sys.path: the families and their world live beside this script.
from tools.trust_probe.hostile import bodies, files, secrets_family, stale  # noqa: E402
from tools.trust_probe.hostile_numbers import numbers  # noqa: E402
from tools.trust_probe.lifecycle import conflicts, partial  # noqa: E402
from tools.trust_probe.store import bigfile, busy, diskfull  # noqa: E402
from tools.trust_probe.tenancy import edit, floor, legacyvar  # noqa: E402
from tools.trust_probe.twin import twins, wideoverlap  # noqa: E402
from tools.trust_probe.world import (  # noqa: E402
    FAMILIES,
    SECRET_WORDS,
    Tally,
    alice_asks,
    build_world,
    hidden_only,
    http_client,
)

# --- The parent: one child per database, one table ------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--postgres",
        default=os.environ.get("TRUST_PG_URL", ""),
        help="a PostgreSQL URL whose database this script may create and drop",
    )
    parser.add_argument("--quick", action="store_true", help="smaller grids (a few minutes per database)")
    parser.add_argument("--json", help="also write every family's figures and notes to this file")
    parser.add_argument("--families", default=",".join(FAMILIES), help="a comma-separated subset to run")
    parser.add_argument("--child", choices=("sqlite", "postgres"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.postgres, args.quick, set(args.families.split(",")))

    results = {}
    for database in ("sqlite", "postgres"):
        if database == "postgres" and not args.postgres:
            print("PostgreSQL: skipped (give --postgres or TRUST_PG_URL)")
            continue
        started = time.monotonic()
        command = [
            sys.executable,
            __file__,
            "--child",
            database,
            "--postgres",
            args.postgres,
            "--families",
            args.families,
        ]
        if args.quick:
            command.append("--quick")
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=1800)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            print(f"{database}: the probe failed\n{done.stderr[-3000:]}")
            sys.exit(1)
        results[database] = json.loads(lines[-1])
        print(f"{database}: {time.monotonic() - started:.0f} s")

    print()
    print("| family | " + " | ".join(f"{db} tried | held | failed | leaked | s" for db in results) + " |")
    print("|---|" + "---|---|---|---|---|" * len(results))
    for family in FAMILIES:
        cells = []
        for db in results:
            row = results[db][family]
            cells.append(
                " | ".join(str(row.get(k, "")) for k in ("tried", "held", "failed", "leaked", "seconds"))
                if row["tried"]
                else "- | - | - | - | -"
            )
        print(f"| {family} | " + " | ".join(cells) + " |")
    for db, result in results.items():
        notes = [f"{family}: {note}" for family in FAMILIES for note in result[family]["notes"][:5]]
        notes += [f"bigfile: {peak}" for peak in result["bigfile"].get("peaks", [])]
        if notes:
            print(f"\n{db} notes:\n  " + "\n  ".join(notes))
    totals = {
        db: {k: sum(r[f][k] for f in FAMILIES) for k in ("tried", "held", "failed", "leaked")}
        for db, r in results.items()
    }
    print(
        "\ntotals: "
        + ", ".join(
            f"{db} tried {t['tried']}, held {t['held']}, failed {t['failed']}, leaked {t['leaked']}"
            for db, t in totals.items()
        )
    )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


# --- The child: one database ---------------------------------------------------------------------


def child(database: str, postgres_url: str, quick: bool, chosen: set[str]) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="ragsite-trust-"))
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "SECRET_KEY": secrets.token_urlsafe(50),
            "DEBUG": "false",
            "EMBED_BACKEND": "hash",
            "DATA_DIR": str(scratch / "data"),
            "MEDIA_ROOT": str(scratch / "media"),
            "LOG_LEVEL": "ERROR",
            "Q_SYNC": "true",
            "BUILD_HEARTBEAT_TIMEOUT": "30",
            "EXTRACT_TIMEOUT": "5",
            "EXTRACT_MEMORY_MB": "512",
        }
    )
    for name in [n for n in os.environ if n.startswith("KNOWLEDGE_")]:
        del os.environ[name]
    if database == "postgres":
        os.environ["DATABASE_URL"] = postgres_url
        _recreate_database(postgres_url)
    else:
        os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'trust.sqlite3'}"

    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    tally = Tally()

    def run(family: str, probe, *args) -> None:
        if family in chosen:
            started = time.monotonic()
            try:
                probe(tally, *args)
            except Exception as exc:  # a probe that breaks is a failure of its family, not of the others
                import traceback

                traceback.print_exc()
                tally.count(family, failed=True, note=f"the probe broke: {type(exc).__name__}: {exc}")
            tally[family]["seconds"] = round(time.monotonic() - started, 1)

    try:
        with serving() as base:
            world = build_world(scratch)
            run("isolation", isolation, base, world)
            run("oracles", oracles, base, world)
            run("overlap", overlap, base, world, quick)
            pairs = []
            if chosen & {"ids", "scores", "floor"}:  # one set of requests for both, and floor's pairs
                started = time.monotonic()
                pairs = twins(tally, base, world, scratch, quick)
                tally["ids"]["seconds"] = round(time.monotonic() - started, 1)
            run("wideoverlap", wideoverlap, base, world, scratch, quick)
            run("legacyvar", legacyvar, base, world, scratch)
            run("edit", edit, base, world, scratch, quick)
            run("floor", floor, base, world, pairs, quick)
            run("bodies", bodies, base, world)
            run("files", files, base, world, scratch)
            run("diskfull", diskfull, base, world, scratch, quick)
            run("numbers", numbers, base, world, scratch)
            run("partial", partial, base, world, scratch)
            run("conflicts", conflicts, base, world, scratch)
            run("busy", busy, base, world, database)
        run("bigfile", bigfile, scratch)
        run("stale", stale, scratch)
        run("secrets", secrets_family)
        if database == "postgres":
            from tools.trust_probe.rls import rls_family

            run("rls", rls_family)
    finally:
        from django.db import connections

        connections.close_all()
        if database == "postgres":
            _drop_database(postgres_url)
        shutil.rmtree(scratch, ignore_errors=True)  # deployment folders and 150 MB of bigfile's inputs
    print(json.dumps(tally))


def _recreate_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def _drop_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@contextmanager
def serving():
    """The WSGI application on 127.0.0.1 (an ephemeral port), in threads of this process."""
    from socketserver import ThreadingMixIn
    from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

    from config.wsgi import application

    class Server(ThreadingMixIn, WSGIServer):
        daemon_threads = True

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args):
            pass

    server = make_server("127.0.0.1", 0, application, server_class=Server, handler_class=Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def isolation(tally: Tally, base: str, world: dict) -> None:
    headers = {"Authorization": f"Bearer {world['b_key']}"}
    search = {"question": "carry-over capped", "min_score": 0}
    # Each probe with a body its route accepts, so the answer comes from the object look-up, not
    # from validating the body.
    probes = [
        ("get", "/api/v1/collections/{}", ("alpha", "missing"), None),
        ("post", "/api/v1/collections/{}/search", ("alpha", "missing"), search),
        ("post", "/api/v1/collections/{}/build", ("alpha", "missing"), {}),
        ("post", "/api/v1/collections/{}/search", ("labelled", "missing2"), search),
        ("get", "/api/v1/memory/nodes/mem/{}/0", (str(world["memory"]), "999999"), None),
        ("put", "/api/v1/memory/records/mem/{}", (str(world["memory"]), "999999"), {"text": "overwrite"}),
        ("delete", "/api/v1/memory/records/mem/{}", (str(world["memory"]), "999999"), None),
    ]
    variants = ["{}", "{}%00", "{}%2F..", "{}\u200b", "{}/"]

    def named(content: bytes, name: str) -> bytes:
        # The id as a whole token only: a record id of 1 must not turn "/api/v1/docs" into "/api/vX/docs".
        return re.sub(rb"(?<![0-9A-Za-z])" + re.escape(name.encode()) + rb"(?![0-9A-Za-z])", b"X", content)

    with http_client() as http:
        for method, template, (theirs, missing), body in probes:
            for variant in variants:
                one = http.request(
                    method, base + template.format(variant.format(theirs)), headers=headers, json=body
                )
                two = http.request(
                    method, base + template.format(variant.format(missing)), headers=headers, json=body
                )
                same = one.status_code == two.status_code and named(one.content, theirs) == named(
                    two.content, missing
                )
                leaked = any(w in one.text for w in ("private note", "vault code", "Hooli"))
                tally.count(
                    "isolation",
                    failed=one.status_code >= 500 or not same,
                    leaked=leaked,
                    note=f"{method} {template} {variant}: {one.status_code} vs {two.status_code}",
                )
        for _ in range(3):
            recall = http.post(base + "/api/v1/memory/recall", headers=headers, json={"query": "vault code"})
            tally.count("isolation", failed=recall.status_code != 200, leaked="4417" in recall.text)
        listing = http.get(base + "/api/v1/collections/", headers=headers)
        tally.count("isolation", failed=listing.status_code != 200, leaked="alpha" in listing.text)


def oracles(tally: Tally, base: str, world: dict) -> None:
    headers = {"Authorization": f"Bearer {world['b_key']}"}
    a_headers = {"Authorization": f"Bearer {world['a_key']}"}
    with http_client() as http:
        b_collection = "/api/v1/collections/alpha/search"
        for question in ("carry-over", "leave", "days"):
            one = http.post(
                base + b_collection, headers=a_headers, json={"question": question, "onBehalfOf": "agent-b"}
            )
            two = http.post(
                base + b_collection, headers=a_headers, json={"question": question, "onBehalfOf": "zz-nobody"}
            )
            tally.count(
                "oracles",
                failed=one.status_code >= 500,
                leaked=one.content != two.content,
                note=f"onBehalfOf: {one.status_code} {one.text[:80]} vs {two.status_code} {two.text[:80]}",
            )
            url = "/api/v1/collections/labelled/search"
            from collections_app.models import Reader

            Reader.objects.get_or_create(external_id="carol@example.com")
            known = http.post(
                base + url, headers=a_headers, json={"question": question, "reader": "carol@example.com"}
            )
            unknown = http.post(
                base + url, headers=a_headers, json={"question": question, "reader": "zz@nobody"}
            )
            tally.count(
                "oracles",
                failed=known.status_code >= 500,
                leaked=known.content != unknown.content,
                note=f"reader: {known.status_code} vs {unknown.status_code}",
            )
        del headers


def overlap(tally: Tally, base: str, world: dict, quick: bool) -> None:
    headers = {"Authorization": f"Bearer {world['a_key']}"}
    secrets_ = hidden_only(world)
    questions = [
        "acquisition target",
        "Hooli price",
        "ninety million",
        "canteen opens",
        "leave policy",
        "travel mileage",
        "zanzibarquux codename",
        "SECRETSALARY band",
        "deal closes March",
        "public rate",
        "twenty days",
        "weekday",
    ]
    arounds = (0, 1, 2, 5)
    floors = (None, 0, 0.01)
    mosts = (1, 5, 50)
    if quick:
        questions, floors, mosts = questions[:6], (0,), (5,)
    with http_client() as http:
        for question in questions:
            for around in arounds:
                for floor in floors:
                    for most in mosts:
                        body = alice_asks(question, around, most, floor)
                        response = http.post(
                            base + "/api/v1/collections/labelled/search", headers=headers, json=body
                        )
                        text = (
                            " ".join(p["text"] for p in response.json().get("paragraphs", []))
                            if response.status_code == 200
                            else ""
                        )
                        found = [s for s in secrets_ if s in text] + [w for w in SECRET_WORDS if w in text]
                        tally.count(
                            "overlap",
                            failed=response.status_code != 200,
                            leaked=bool(found),
                            note=f"{question!r} around {around}: {found[:2]}",
                        )
        # bob may read everything: the cut is per reader, not a loss of text.
        bob = http.post(
            base + "/api/v1/collections/labelled/search",
            headers=headers,
            json={"question": "Hooli acquisition", "reader": "bob@example.com", "min_score": 0},
        )
        tally.count(
            "overlap", failed="Hooli" not in bob.text, note="bob (pub+secret) did not get the merger note"
        )


if __name__ == "__main__":
    main()
