"""The trust probe, reproducible: tried / failed / leaked per probe family, on SQLite and PostgreSQL.

    python bench/trust.py [--postgres postgres://postgres@127.0.0.1:5432/ragsite_trust_bench] [--quick]

Each database runs in a child process of its own (Django's settings are per process): a
throw-away store (a SQLite file in a temporary folder; a PostgreSQL database created and
dropped), migrated from scratch, served over HTTP on 127.0.0.1 only by a threaded WSGI server in
that process. The embedder is the deterministic `hash` backend: this measures trust, not
ranking quality. Bounded: a few minutes per database at most.

Families (the 2026-12-01 review's, where this branch answers them):

* isolation - agent B's key against agent A's collections, memories and nodes: every answer
  must be byte-identical to the answer for a missing object. leaked = an answer holding A's text.
* oracles - `onBehalfOf` naming another agent vs nobody, `reader` naming a known vs an unknown
  reader: leaked = a pair of answers that differ.
* overlap - reader alice (label pub) searches a per-reader collection whose structure pieces
  alternate pub/secret with overlap, over questions x around x floor x most: leaked = an answer
  holding 20 or more characters that only secret pieces hold.
* scores - alice asks (questions x around x floor x most, hybrid as the API ranks) a per-reader
  collection and its twin, whose secret pieces hold other letters in place of every letter only
  they hold (so both chunk alike): leaked = her answers (texts, scores, order) differ, i.e. a
  score moved with text she may not read (the overlap copied into a readable piece, statistics).
  The lexical and vector arms alone: tests/collections/test_search_overlap.py.
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
* rls (PostgreSQL only) - deliberately unfiltered queries on every agent-scoped table inside
  agent B's row-level-security scope (a request's, and inside B's build task and node-building
  task as a worker runs them): leaked = a row of agent A.

Not measured here: ordinal gaps (issue 15's *Numbering*, tests/collections/test_search_index.py).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FAMILIES = ("isolation", "oracles", "overlap", "scores", "bodies", "files", "stale", "secrets", "rls")
SECRET_WORDS = ("Hooli", "ninety million", "zanzibarquux", "SECRETSALARY")


# --- The parent: one child per database, one table ------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--postgres",
        default=os.environ.get("TRUST_PG_URL", ""),
        help="a PostgreSQL URL whose database this script may create and drop",
    )
    parser.add_argument("--quick", action="store_true", help="a smaller overlap grid")
    parser.add_argument("--child", choices=("sqlite", "postgres"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.postgres, args.quick)

    results = {}
    for database in ("sqlite", "postgres"):
        if database == "postgres" and not args.postgres:
            print("PostgreSQL: skipped (give --postgres or TRUST_PG_URL)")
            continue
        started = time.monotonic()
        command = [sys.executable, __file__, "--child", database, "--postgres", args.postgres]
        if args.quick:
            command.append("--quick")
        done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            print(f"{database}: the probe failed\n{done.stderr[-3000:]}")
            sys.exit(1)
        results[database] = json.loads(lines[-1])
        print(f"{database}: {time.monotonic() - started:.0f} s")

    print()
    print("| family | " + " | ".join(f"{db} tried | failed | leaked" for db in results) + " |")
    print("|---|" + "---|---|---|" * len(results))
    for family in FAMILIES:
        cells = []
        for db in results:
            row = results[db][family]
            tried = row["tried"]
            cells.append(f"{tried} | {row['failed']} | {row['leaked']}" if tried else "- | - | -")
        print(f"| {family} | " + " | ".join(cells) + " |")
    for db, result in results.items():
        notes = [f"{family}: {note}" for family in FAMILIES for note in result[family]["notes"][:5]]
        if notes:
            print(f"\n{db} notes:\n  " + "\n  ".join(notes))
    totals = {
        db: {k: sum(r[f][k] for f in FAMILIES) for k in ("failed", "leaked")} for db, r in results.items()
    }
    print(
        "\ntotals: "
        + ", ".join(f"{db} failed {t['failed']}, leaked {t['leaked']}" for db, t in totals.items())
    )


# --- The child: one database ---------------------------------------------------------------------


class Tally(dict):
    def __init__(self):
        super().__init__({family: {"tried": 0, "failed": 0, "leaked": 0, "notes": []} for family in FAMILIES})

    def count(self, family: str, *, failed: bool = False, leaked: bool = False, note: str = "") -> None:
        row = self[family]
        row["tried"] += 1
        row["failed"] += int(failed)
        row["leaked"] += int(leaked)
        if (failed or leaked) and note:
            row["notes"].append(note[:300])


def child(database: str, postgres_url: str, quick: bool) -> None:
    scratch = Path(tempfile.mkdtemp(prefix="ragsite-trust-"))
    os.environ.update(
        {
            "DJANGO_SETTINGS_MODULE": "ragsite.settings",
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
    try:
        with serving() as base:
            world = _world(scratch)
            isolation(tally, base, world)
            oracles(tally, base, world)
            overlap(tally, base, world, quick)
            scores(tally, base, world, quick)
            bodies(tally, base, world)
            files(tally, base, world, scratch)
        stale(tally, scratch)
        secrets_family(tally)
        if database == "postgres":
            from bench.trust_rls import rls_family

            rls_family(tally)
    finally:
        from django.db import connections

        connections.close_all()
        if database == "postgres":
            _drop_database(postgres_url)
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

    from ragsite.wsgi import application

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


def _client():
    import httpx

    return httpx.Client(timeout=60)


LABELLED = (
    "# Plans\n\n"
    + "Our public leave policy gives everyone twenty days a year and is generous and clear. " * 6
    + "\n\nRestricted merger note: the acquisition target is Hooli and the price is ninety million. "
    + "The codename zanzibarquux covers it and SECRETSALARY figures are attached. " * 3
    + "\n\n"
    + "The canteen opens at eight and closes at four on every weekday of the year. " * 6
    + "\n\nRestricted: the Hooli deal closes in March; the SECRETSALARY band rises by ninety million. " * 2
    + "\n\n"
    + "Travel is booked in standard class and mileage is paid at the usual public rate. " * 6
)


def _world(scratch: Path) -> dict:
    """Two agents, readers, a per-reader collection labelled after its build, memories."""
    from collections_app.models import Label, Paragraph
    from collections_app.services.agents import create_agent, create_collection, create_reader
    from collections_app.services.builds import build_collection
    from memory_app.services import store_memory

    folder = scratch / "deployment-secret-folder"
    (folder / "alpha").mkdir(parents=True)
    (folder / "labelled").mkdir()
    (folder / "alpha" / "leave.md").write_text(
        "# Leave\n\nAlpha's private note: carry-over is capped at 7 days."
    )
    (folder / "labelled" / "plans.md").write_text(LABELLED)
    os.environ["KNOWLEDGE_ALPHA_FOLDER"] = str(folder / "alpha")
    os.environ["KNOWLEDGE_LABELLED_FOLDER"] = str(folder / "labelled")

    a, a_key = create_agent(agent_id="agent-a")
    b, b_key = create_agent(agent_id="agent-b")
    alpha = create_collection(agent=a, name="alpha")
    labelled = create_collection(
        agent=a, name="labelled", method="structure", size=400, overlap=150, per_reader=True
    )
    build_collection(collection=alpha)
    build_collection(collection=labelled)
    public, secret = Label.objects.create(name="pub"), Label.objects.create(name="secret")
    paragraphs = list(Paragraph.objects.filter(collection=labelled).order_by("ordinal"))
    previous_end = 0
    for paragraph in paragraphs:  # labelled after the build, as a librarian does
        # Secret when its own text (past what the overlap copied from the piece before) is restricted.
        own = paragraph.text[max(0, previous_end - paragraph.start_char) :]
        hidden = any(word in own for word in (*SECRET_WORDS, "Restricted"))
        paragraph.labels.add(secret if hidden else public)
        previous_end = paragraph.end_char
    create_reader(external_id="alice@example.com", labels=["pub"])
    create_reader(external_id="bob@example.com", labels=["pub", "secret"])
    memory, _nodes = store_memory(agent=a, text="Agent A's memory: the vault code is 4417.")
    disguised = _twin(folder, labelled, paragraphs, secret, public)
    readable = [p for p in paragraphs if p.labels.filter(name="pub").exists()]
    hidden = [p for p in paragraphs if not p.labels.filter(name="pub").exists()]
    return {
        "a_key": a_key,
        "b_key": b_key,
        "memory": memory.pk,
        "folder": str(folder),
        "readable": readable,
        "hidden": hidden,
        "twin_alike": disguised,
    }


def _twin(folder: Path, labelled, paragraphs, secret, public) -> bool:
    """The collection `disguised`: plans.md with every letter and digit only secret pieces hold replaced
    by another, labelled piece for piece as `labelled`; True when it chunked exactly alike."""
    import random

    from collections_app.models import Paragraph
    from collections_app.services.agents import create_collection
    from collections_app.services.builds import build_collection
    from collections_app.text.extract import extract

    text = extract("plans.md", LABELLED.encode()).text
    owner = [None] * len(text)
    for paragraph in reversed(paragraphs):
        owner[paragraph.start_char : paragraph.end_char] = [paragraph] * (
            paragraph.end_char - paragraph.start_char
        )
    rng = random.Random(15)
    other = "".join(
        (rng.choice("bdfgkmpvwz") if ch.isalpha() else rng.choice("0123456789") if ch.isdigit() else ch)
        if o is not None and o.labels.filter(name="secret").exists()
        else ch
        for ch, o in zip(text, owner, strict=True)
    )
    (folder / "disguised").mkdir()
    (folder / "disguised" / "plans.md").write_text(other)
    os.environ["KNOWLEDGE_DISGUISED_FOLDER"] = str(folder / "disguised")
    twin = create_collection(
        agent=labelled.agent, name="disguised", method="structure", size=400, overlap=150, per_reader=True
    )
    build_collection(collection=twin)
    pieces = list(Paragraph.objects.filter(collection=twin).order_by("ordinal"))
    for piece, original in zip(pieces, paragraphs, strict=False):
        piece.labels.add(secret if original.labels.filter(name="secret").exists() else public)
    return [(p.start_char, p.end_char) for p in pieces] == [(p.start_char, p.end_char) for p in paragraphs]


def _hidden_only(world) -> list[str]:
    """20-character stretches held only by secret pieces (the owner of a character is the earliest
    piece covering it, since overlap copies the end of a piece into the next)."""
    pieces = sorted(world["readable"] + world["hidden"], key=lambda p: p.ordinal)
    hidden_ids = {p.pk for p in world["hidden"]}
    owner: dict[int, int] = {}
    for piece in reversed(pieces):
        for position in range(piece.start_char, piece.end_char):
            owner[position] = piece.pk
    stretches = []
    for piece in world["hidden"]:
        own = [i for i in range(piece.start_char, piece.end_char) if owner.get(i) == piece.pk]
        text = LABELLED_TEXT(world)
        for start in own[::7]:
            chunk = text[start : start + 20]
            if len(chunk) == 20 and all(owner.get(start + k) in hidden_ids for k in range(20)):
                if text.count(chunk) == 1:
                    stretches.append(chunk)
    return stretches


def LABELLED_TEXT(world) -> str:  # noqa: N802 - the document's text as extracted
    from collections_app.text.extract import extract

    return extract("plans.md", LABELLED.encode()).text


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

    with _client() as http:
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
    with _client() as http:
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
    secrets_ = _hidden_only(world)
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
    with _client() as http:
        for question in questions:
            for around in arounds:
                for floor in floors:
                    for most in mosts:
                        body = {
                            "question": question,
                            "reader": "alice@example.com",
                            "around": around,
                            "most": most,
                        }
                        if floor is not None:
                            body["min_score"] = floor
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


def scores(tally: Tally, base: str, world: dict, quick: bool) -> None:
    headers = {"Authorization": f"Bearer {world['a_key']}"}
    tally.count("scores", failed=not world["twin_alike"], note="the twin collection did not chunk alike")
    questions = [
        "acquisition target Hooli",
        "Hooli price ninety million",
        "zanzibarquux codename",
        "SECRETSALARY band rises",
        "deal closes March",
        "public leave policy",
        "canteen weekday",
        "travel mileage rate",
    ]
    grid = [
        (floor, around, most)
        for floor in ((0,) if quick else (0, None))
        for around in (0, 1, 3)
        for most in ((5,) if quick else (1, 5, 50))
    ]
    with _client() as http:
        for question in questions:
            for floor, around, most in grid:
                body = {"question": question, "reader": "alice@example.com", "around": around, "most": most}
                if floor is not None:
                    body["min_score"] = floor
                one = http.post(base + "/api/v1/collections/labelled/search", headers=headers, json=body)
                two = http.post(base + "/api/v1/collections/disguised/search", headers=headers, json=body)
                tally.count(
                    "scores",
                    failed=one.status_code != 200 or two.status_code != 200,
                    leaked=one.content != two.content,
                    note=f"{question!r} around {around} floor {floor}: {one.status_code} {two.status_code}",
                )


def bodies(tally: Tally, base: str, world: dict) -> None:
    key = world["a_key"]
    surfaces = {
        "search": ("POST", "/api/v1/collections/alpha/search"),
        "store": ("POST", "/api/v1/memory/memories"),
        "recall": ("POST", "/api/v1/memory/recall"),
        "replace": ("PUT", f"/api/v1/memory/records/mem/{world['memory']}"),
        "unknown": ("POST", "/api/v1/nonexistent"),
        "embeddings": ("POST", "/v1/embeddings"),
        "tokenize": ("POST", "/v1/tokenize"),
        "count_tokens": ("POST", "/count_tokens"),
        "mcp": ("POST", "/mcp"),
    }
    big = "x" * (3 * 1024 * 1024)
    payloads = {
        "3 MB": json.dumps({"question": big, "text": big, "query": big, "input": big}),
        "10 MB": json.dumps({"text": "y" * (10 * 1024 * 1024)}),
        "nested 1k": "[" * 1000 + "]" * 1000,
        "nested 100k": "[" * 100_000 + "]" * 100_000,
        "object 50k": '{"a":' * 50_000 + "1" + "}" * 50_000,
        "surrogate": '{"question":"x\\udfffy","text":"x\\udfffy","query":"x\\udfffy","input":"x\\udfffy"}',
        "nan": '{"question":"q","min_score":NaN,"text":"t","query":"q","input":"t"}',
        "nul": '{"question":"a\\u0000b","text":"a\\u0000b","query":"a\\u0000b","input":"a\\u0000b",'
        '"reader":"r\\u0000","onBehalfOf":"x\\u0000"}',
        "latin-1": '{"question":"caf\xe9"}'.encode("latin-1"),
        "types": '{"question":"q","min_score":true,"around":"1","most":"5","text":5,"query":[],"input":{}}',
        "empty": "",
        "array": "[1,2,3]",
    }
    with _client() as http:
        for surface, (method, path) in surfaces.items():
            for name, payload in payloads.items():
                response = http.request(
                    method,
                    base + path,
                    content=payload,
                    headers={
                        "Authorization": f"Bearer {key}",
                        "Content-Type": "application/json",
                        "Accept": "application/json",
                    },
                )
                kind = response.headers.get("content-type", "")
                html = not kind.startswith("application/json")
                tally.count(
                    "bodies",
                    failed=response.status_code >= 500 or html,
                    note=f"{surface} {name}: {response.status_code} {kind}",
                )
        for path in ("/api/v1/collections/al%00pha/search", "/api/v1/collections/alpha%2F../search"):
            for method in ("GET", "POST", "PUT", "DELETE"):
                response = http.request(
                    method, base + path, headers={"Authorization": f"Bearer {key}"}, json={}
                )
                tally.count(
                    "bodies",
                    failed=response.status_code >= 500
                    or not response.headers.get("content-type", "").startswith("application/json"),
                    note=f"{method} {path}: {response.status_code}",
                )


def files(tally: Tally, base: str, world: dict, scratch: Path) -> None:
    from collections_app.models import BuildRun
    from collections_app.services.agents import create_collection, get_agent
    from collections_app.services.builds import build_collection
    from tests.hostile import long_path, looping_pdf, non_utf8_name, sparse_file, zip_bomb_docx
    from tests.office_files import odf_bytes, zip_bomb

    folder = scratch / "deployment-secret-folder" / "hostile"
    folder.mkdir()
    (folder / "good.md").write_text("# Good\n\nThe canteen opens at eight.")
    (folder / "inj\n2026-12-01 07:00:00,000 CRITICAL ragsite.fake forged.exe").write_text("x")
    zip_bomb_docx(folder / "bomb.docx", expanded_mb=700)
    looping_pdf(folder / "loop.pdf")
    sparse_file(folder / "big.txt")
    bad = non_utf8_name(folder)
    long_path(folder)
    # The office formats (issue 25): a zip bomb of each package kind, and XML nested 50,000 deep.
    office = {
        "bomb.pptx": "ppt/slides/slide1.xml",
        "bomb.xlsx": "xl/worksheets/sheet1.xml",
        "bomb.epub": "OEBPS/c0.xhtml",
        "bomb.odt": "content.xml",
    }
    for name, member in office.items():
        zip_bomb(folder / name, member=member, declared_mb=300)
    (folder / "nested.odp").write_bytes(
        odf_bytes("<draw:page>" * 50_000 + "</draw:page>" * 50_000, kind="presentation")
    )
    os.environ["KNOWLEDGE_HOSTILE_FOLDER"] = str(folder)
    collection = create_collection(agent=get_agent("agent-a"), name="hostile")
    started = time.monotonic()
    run = build_collection(collection=collection)
    seconds = time.monotonic() - started
    expected = {
        "bomb.docx",
        "loop.pdf",
        "big.txt",
        bad.encode("utf-8", "surrogateescape").decode("utf-8", "replace"),
        *office,
        "nested.odp",
    }
    refused = set(run.refused or [])
    for name in sorted(expected) + ["long path", "log-forging name"]:
        present = (
            name in refused
            if name in expected
            else any(n.startswith("ddd") for n in refused)
            if name == "long path"
            else any(n.startswith("inj\n") for n in refused)
        )
        tally.count(
            "files",
            failed=run.status != BuildRun.SUCCEEDED or not present or seconds > 60,
            note=f"{name!r}: status {run.status}, refused {present}, {seconds:.1f} s",
        )
    with _client() as http:
        answer = http.get(
            base + "/api/v1/collections/hostile", headers={"Authorization": f"Bearer {world['a_key']}"}
        )
    record = (
        json.dumps([run.error, run.warnings, run.problems, run.refused], ensure_ascii=False) + answer.text
    )
    tally.count(
        "files",
        leaked=world["folder"] in record or "deployment-secret" in record,
        note="a deployment path in the build record or the API",
    )


def stale(tally: Tally, scratch: Path) -> None:
    """The review's D2, three times: the sweep fails build A while it runs, B succeeds, A goes on."""
    from datetime import timedelta

    from django.utils import timezone

    from collections_app.models import BuildRun, Paragraph
    from collections_app.services.agents import create_collection, get_agent
    from collections_app.services.builds import build_collection, fail_stale_builds, request_build, run_build

    for attempt in range(3):
        folder = scratch / f"race{attempt}"
        folder.mkdir()
        (folder / "good.md").write_text("The answer is SEVENTEEN.")
        (folder / "slow.md").write_text("A long document. " * 50)
        name = f"race{attempt}"
        os.environ[f"KNOWLEDGE_RACE{attempt}_FOLDER"] = str(folder)
        collection = create_collection(agent=get_agent("agent-a"), name=name, method="fixed", size=200)
        fired = []

        def meanwhile(run, folder=folder, collection=collection, fired=fired):
            if fired or not run.paragraphs_total or run.paragraphs_done < run.paragraphs_total:
                return
            fired.append(True)
            fail_stale_builds(now=timezone.now() + timedelta(seconds=31))
            (folder / "good.md").write_text("The answer is NINETY.")
            (folder / "slow.md").unlink()
            build_collection(collection=collection)

        a = request_build(collection=collection, enqueue=False)
        run_build(a.pk, report=meanwhile)
        a.refresh_from_db()
        texts = " ".join(Paragraph.objects.filter(collection=collection).values_list("text", flat=True))
        committed = a.status == BuildRun.SUCCEEDED or "SEVENTEEN" in texts or "long document" in texts
        tally.count(
            "stale",
            failed=not fired or "NINETY" not in texts,
            leaked=committed,
            note=f"attempt {attempt}: A {a.status}, text {texts[:60]!r}",
        )


def secrets_family(tally: Tally) -> None:
    env = {**os.environ, "SECRET_KEY": "", "DEBUG": "false"}
    for command in (["manage.py", "check"], ["-c", "import ragsite.wsgi"]):
        done = subprocess.run(
            [sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        tally.count("secrets", failed=done.returncode == 0, note=f"{' '.join(command)} started with no key")


if __name__ == "__main__":
    main()
