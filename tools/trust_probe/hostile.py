"""tools/trust_probe/probe.py's hostile-input families: bodies on every surface, files a build must refuse,
a stale build that must not commit, and a server that must not start without its secret key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from tools.trust_probe.world import Tally, http_client

ROOT = Path(__file__).resolve().parents[2]


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
    with http_client() as http:
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
    # A CSV whose one quoted field never ends, and a picture of 400 million pixels in a few hundred KB.
    (folder / "field.csv").write_bytes(b'a,b\n"' + b"x" * 20_000_000 + b'",1\n')
    from PIL import Image

    Image.new("L", (20_000, 20_000), 255).save(folder / "pixels.png", format="PNG")
    os.environ["KNOWLEDGE_AGENT_A__HOSTILE_FOLDER"] = str(folder)
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
        "field.csv",
        "pixels.png",
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
    with http_client() as http:
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
        os.environ[f"KNOWLEDGE_AGENT_A__RACE{attempt}_FOLDER"] = str(folder)
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
    for command in (["manage.py", "check"], ["-c", "import config.wsgi"]):
        done = subprocess.run(
            [sys.executable, *command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
        )
        tally.count("secrets", failed=done.returncode == 0, note=f"{' '.join(command)} started with no key")
