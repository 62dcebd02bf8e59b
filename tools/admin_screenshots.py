"""Screenshots of every admin screen for docs/admin.md, taken with the browser the tests use.

    .venv/bin/python tools/admin_screenshots.py [--out docs/img] [--backend local|hash]

Desktop screens are taken at 1280 px wide, phone screens (names ending in -phone) at 390 px.

Builds a throwaway installation in a temporary folder (its own SQLite store, uploads
and a copy of the sample documents), starts `runserver` on it, and drives Debian's
chromium headless through each screen. Nothing outside the temporary folder and the
output folder is written. Needs /usr/bin/chromium (`apt-get install -y chromium`).
"""

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
MAX_BYTES = 150 * 1024
CONFLICTING = {
    "leave-2023.md": "# Leave\n\nCarry-over of annual leave is capped at 5 days in every calendar year.\n",
    "leave-2024.md": "# Leave\n\nCarry-over of annual leave is capped at 10 days in every calendar year.\n",
}


# An agent's long memory for the memory screens: long enough to run past the window of both the
# local model (256 tokens) and the hash backend (256 words), so each divides it into nodes.
LONG_MEMORY = """\
Customer: Northwind Traders, account 4471. Contact: Dana Whitfield, office manager, prefers email over phone \
and answers within the hour on weekdays. Their office moved to the third floor of the Harbour \
Street building \
in March, and since then the VPN drops every afternoon between two and four.

What we tried so far. The client was reinstalled on three laptops without any change. Their router logs show \
the tunnel renegotiating every forty minutes, which matches the key lifetime in the old \
configuration that the \
previous provider left behind. Dana sent the exported configuration on 12 May; the lifetime there is 2,400 \
seconds, not the 28,800 the handbook recommends for site-to-site tunnels. Changing it needs their admin \
password, which only the owner, Luis Ortega, holds. He travels most weeks and asked us to schedule changes \
for Friday mornings.

Agreed next steps. On Friday at nine we raise the key lifetime to eight hours, update the firmware of the \
router from 3.2.1 to 3.4.0 (the release notes mention a fix for renegotiation under load), and keep the old \
configuration file so we can roll back within minutes. Dana will ask the staff to save their work before \
nine. If the drops continue after the change, the next suspect is the building's shared uplink: the new \
floor shares it with two other tenants, and the afternoon window matches their video calls.

Billing. Their contract covers remote support only. An on-site visit is billed at the standard hourly rate \
with a two-hour minimum, and Luis must approve it in writing before anyone travels. He approved one visit in \
April for the move itself, so a second one this quarter needs a new approval.

Things to remember about this customer. They keep a paper log of every outage next to the printer and will \
read from it on the phone; ask them to photograph the page instead. Their accountant works from home on \
Thursdays and is the first to notice when the tunnel is down, because the bookkeeping system lives on the \
office server. Never restart that server during the last three working days of a month: they close their \
books then, and a restart in the middle of a run cost them a day of work last year. When in doubt, email \
Dana first and wait for her answer before changing anything on their network.
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def configure(workdir: Path, backend: str) -> dict:
    folder = workdir / "deployment" / "handbook"
    shutil.copytree(
        ROOT / "collections_app" / "sample_docs", folder, ignore=shutil.ignore_patterns("*.py", "__pycache__")
    )
    # Two files a build refuses, each for a reason a librarian can act on.
    (folder / "scanned-form.pdf").write_bytes(_scanned_pdf())
    (folder / "old-export.pdf").write_bytes(b"%PDF-1.4\n% truncated by the export\n")
    policies = workdir / "deployment" / "policies"
    policies.mkdir(parents=True)
    for name, text in CONFLICTING.items():
        (policies / name).write_text(text)
    env = {
        "DATA_DIR": str(workdir / "data"),
        "MEDIA_ROOT": str(workdir / "media"),
        "DATABASE_URL": f"sqlite:///{workdir / 'data' / 'ragsite.sqlite3'}",
        "EMBED_BACKEND": backend,
        "Q_SYNC": "true",
        "DEBUG": "false",
        "LOG_LEVEL": "WARNING",
        "MODEL_PRICES": '{"judge-mini": {"input": 0.15, "output": 0.6}}',
        "KNOWLEDGE_HANDBOOK_FOLDER": str(folder),
        "KNOWLEDGE_POLICIES_FOLDER": str(policies),
        "DJANGO_SETTINGS_MODULE": "config.settings",
    }
    (workdir / "data").mkdir()
    os.environ.update(env)
    return env


def _scanned_pdf() -> bytes:
    """A PDF with pages but no text layer, as a scanner writes it."""
    sys.path.insert(0, str(ROOT))
    from collections_app.samples import pdf_bytes

    return pdf_bytes([[], []])


def populate() -> dict:
    """A small, plausible installation: two agents' worth of collections, labels, readers, spend."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone

    from collections_app.models import BuildRun, Label, ModelCall, Paragraph
    from collections_app.services.agents import create_agent, create_collection, create_reader
    from collections_app.services.builds import build_collection
    from collections_app.services.documents import set_paragraphs_enabled
    from collections_app.services.ledger import record_call
    from collections_app.services.readers.labels import add_labels
    from collections_app.services.review import approve_documents

    call_command("migrate", verbosity=0)
    get_user_model().objects.create_superuser("admin", "admin@example.com", "screenshots")
    helpdesk, _ = create_agent(agent_id="helpdesk", name="Helpdesk assistant")
    helpdesk.daily_budget, helpdesk.runaway_limit = 2, 60
    helpdesk.save()
    create_agent(agent_id="onboarding", name="Onboarding guide")
    handbook = create_collection(
        agent=helpdesk, name="handbook", built_from="the HR share", method="structure"
    )
    policies = create_collection(
        agent=helpdesk,
        name="policies",
        built_from="the policy site",
        method="fixed",
        size=350,
        per_reader=True,
    )
    create_collection(agent=helpdesk, name="benefits", built_from="the benefits wiki")
    for collection in (handbook, policies):
        run = build_collection(collection=collection, requested_by="admin:admin")
        assert run.status == BuildRun.SUCCEEDED, run.error
    build_collection(collection=handbook, requested_by="admin:admin")  # an unchanged rebuild: all reused

    hr, staff = Label.objects.create(name="hr", description="People team"), Label.objects.create(name="staff")
    Label.objects.create(name="finance", description="Finance team")
    create_reader(external_id="alice@example.com", labels=["hr", "staff"])
    create_reader(external_id="bob@example.com", labels=["staff"])
    create_reader(external_id="carol@example.com", labels=["finance"])
    add_labels(Paragraph.objects.filter(collection=handbook, document__name="handbook.md"), [staff])
    add_labels(Paragraph.objects.filter(collection=handbook, document__name="benefits.docx"), [hr])
    add_labels(Paragraph.objects.filter(collection=policies, document__name="leave-2024.md"), [hr])
    approve_documents(policies.documents.filter(name="leave-2024.md"), by="admin")
    # One paragraph taken out of search, to show how a disabled one looks.
    set_paragraphs_enabled(
        paragraphs=Paragraph.objects.filter(collection=handbook, document__name="handbook.md").order_by(
            "index"
        )[2:3],
        enabled=False,
    )

    now = timezone.now()
    for days_ago in range(0, 30):
        for _ in range((days_ago * 7) % 5 + (3 if days_ago % 6 == 0 else 0)):
            call = record_call(
                agent=helpdesk,
                collection=handbook,
                purpose=ModelCall.JUDGE,
                model="judge-mini",
                tokens_in=900 + 37 * days_ago,
                tokens_out=12,
            )
            ModelCall.objects.filter(pk=call.pk).update(
                created_at=now - timedelta(days=days_ago, minutes=days_ago)
            )

    # A build caught half way, for the progress bar (its worker is imaginary; the store is thrown away).
    staged = create_collection(agent=helpdesk, name="archive", built_from="the old intranet export")
    BuildRun.objects.create(
        collection=staged,
        status=BuildRun.RUNNING,
        requested_by="admin:admin",
        started_at=now,
        heartbeat_at=now + timedelta(hours=1),
        documents_total=48,
        documents_done=48,
        paragraphs_total=1200,
        paragraphs_done=530,
        model="all-MiniLM-L6-v2",
    )
    memory = populate_memory(helpdesk)
    return {
        "memory": memory,
        "handbook": handbook.pk,
        "policies": policies.pk,
        "archive": staged.pk,
        "helpdesk": helpdesk.pk,
        "paragraph": Paragraph.objects.filter(collection=handbook, document__name="handbook.md")
        .order_by("index")[1]
        .pk,
        "refused": handbook.documents.get(name="scanned-form.pdf").pk,
        "conflict": policies.documents.get(name="leave-2023.md").pk,
    }


def populate_memory(agent) -> int:
    """The agent's memory: a long record with its nodes, short ones, and two long records whose nodes are
    missing."""
    from memory_app.models import RecordNode
    from memory_app.services import archive_episode, store_memory

    # Tasks run synchronously here (Q_SYNC), so a long record gets its nodes as it is stored.
    memory, _ = store_memory(agent=agent, text=LONG_MEMORY)
    for text in (
        "Dana Whitfield prefers email; she answers within the hour on weekdays.",
        "Northwind's on-site visits need Luis Ortega's written approval.",
    ):
        store_memory(agent=agent, text=text)
    archive_episode(
        agent=agent, text="Helped Dana export the router configuration; the key lifetime is 2,400 s."
    )
    # Two long records stored while the task queue was down: the health page lists them.
    paragraphs = LONG_MEMORY.split("\n\n")
    for kind, text in (
        ("mem", "\n\n".join(paragraphs[1:] + paragraphs[:1])),
        ("ep", "\n\n".join(reversed(paragraphs))),
    ):
        record, _ = (store_memory if kind == "mem" else archive_episode)(agent=agent, text=text)
        RecordNode.objects.filter(parent_kind=kind, parent_id=record.pk).delete()
    return memory.pk


def serve(env: dict, port: int) -> subprocess.Popen:
    server = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload", "--insecure"],
        cwd=ROOT,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return server
        except OSError:
            time.sleep(0.2)
    server.terminate()
    raise SystemExit("the server did not start")


def shoot(base: str, ids: dict, out: Path) -> list[Path]:
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    from playwright.sync_api import sync_playwright

    taken = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.set_default_timeout(20_000)

        def snap(name: str, full: bool = False):
            path = out / f"{name}.png"
            page.screenshot(path=str(path), full_page=full)
            taken.append(path)

        page.goto("/admin/login/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", "screenshots")
        page.click("#login-form input[type=submit]")
        page.wait_for_selector("#user-tools")

        page.goto("/admin/collections_app/collection/")
        snap("admin-collections")
        page.goto(f"/admin/collections_app/collection/{ids['handbook']}/change/")
        page.click("#rebuild-button")
        page.wait_for_selector("ul.messagelist")
        snap("admin-collection")
        page.locator("fieldset:has(h2:text('Builds'))").scroll_into_view_if_needed()
        snap("admin-build-history")
        page.goto(f"/admin/collections_app/collection/{ids['archive']}/change/")
        page.wait_for_selector("#build-progress")
        snap("admin-build-progress")

        page.goto("/admin/collections_app/document/?status__exact=needs_review")
        snap("admin-documents-review")
        page.goto(f"/admin/collections_app/document/{ids['conflict']}/change/")
        snap("admin-document-conflict")
        page.goto(f"/admin/collections_app/document/{ids['refused']}/change/")
        snap("admin-document-refused")
        page.goto(f"/admin/collections_app/document/upload/?collection={ids['handbook']}")
        snap("admin-upload")

        page.goto(f"/admin/collections_app/paragraph/?collection__id__exact={ids['handbook']}")
        snap("admin-paragraphs")
        for box in page.locator('input[name="_selected_action"]').all()[:3]:
            box.check()
        page.select_option("select[name=action]", "add_labels_action")
        page.click("button[name=index]")
        page.wait_for_selector("#label-form")
        page.fill("#id_new_labels", "onboarding")
        snap("admin-add-labels")
        page.goto(f"/admin/collections_app/paragraph/{ids['paragraph']}/change/")
        snap("admin-paragraph")

        page.goto("/admin/collections_app/label/")
        snap("admin-labels")
        page.goto(f"/admin/collections_app/agent/{ids['helpdesk']}/change/")
        page.locator(".field-spend").scroll_into_view_if_needed()
        snap("admin-agent-spend")
        page.goto(f"/admin/collections_app/agent/{ids['helpdesk']}/change/")
        page.fill("#issue-key-name", "helpdesk bot")
        page.click("#issue-key-button")
        page.wait_for_selector("[data-role=raw-key]")
        snap("admin-key-issued")

        page.goto(f"/admin/collections_app/collection/playground/?collection={ids['handbook']}")
        page.fill("#id_question", "How many days of leave can I carry over?")
        page.click("#playground-submit")
        page.wait_for_selector("#playground-result")
        page.locator("#playground-result").scroll_into_view_if_needed()
        snap("admin-playground")
        page.goto(f"/admin/collections_app/collection/playground/?collection={ids['policies']}")
        page.fill("#id_question", "How many days of leave can I carry over?")
        page.select_option("#id_reader", "alice@example.com")
        page.select_option("#id_compare_reader", "bob@example.com")
        page.fill("#id_min_score", "0")
        page.click("#playground-submit")
        page.wait_for_selector("#playground-result")
        page.locator("#playground-result").scroll_into_view_if_needed()
        snap("admin-playground-compare")

        page.goto(f"/admin/collections_app/collection/measure/?collection={ids['handbook']}")
        page.fill(
            "#id_questions",
            "How many days of leave carry over? | five days\n"
            "Who approves travel? | line manager\n! What is the canteen menu?",
        )
        page.click("#measure-submit")  # Q_SYNC: the task has run by the time the page answers
        page.wait_for_selector("#measure-report")
        snap("admin-measure")

        phone = browser.new_context(
            base_url=base, viewport={"width": 390, "height": 844}, storage_state=context.storage_state()
        )
        page = phone.new_page()
        page.goto(f"/admin/collections_app/collection/playground/?collection={ids['handbook']}")
        page.fill("#id_question", "How many days of leave can I carry over?")
        page.click("#playground-submit")
        page.wait_for_selector("#playground-result")
        page.locator("#playground-result").scroll_into_view_if_needed()
        snap("admin-playground-phone")
        page.goto(f"/admin/collections_app/paragraph/?collection__id__exact={ids['handbook']}")
        snap("admin-paragraphs-phone")
        dark = browser.new_context(
            base_url=base,
            viewport={"width": 1280, "height": 800},
            color_scheme="dark",
            storage_state=context.storage_state(),
        )
        page = dark.new_page()
        page.goto(f"/admin/collections_app/agent/{ids['helpdesk']}/change/")
        page.locator(".field-spend").scroll_into_view_if_needed()
        snap("admin-agent-spend-dark")
        page = context.new_page()

        page.goto(f"/admin/memory_app/memory/{ids['memory']}/change/")
        page.locator("fieldset:has(h2:text('Text and nodes'))").scroll_into_view_if_needed()
        snap("memory-record")
        page.goto("/admin/memory_app/memory/")
        page.click("#memory-health")
        page.wait_for_selector("#health-report")
        snap("memory-health", full=True)
        browser.close()
    return taken


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "img"))
    parser.add_argument(
        "--backend",
        default="local",
        choices=["local", "hash"],
        help="the embedder for the throwaway store (hash: no model, fast, meaningless vectors)",
    )
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        raise SystemExit(f"{CHROMIUM} is missing: apt-get install -y chromium")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(ROOT))
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory(prefix="ragsite-screens-") as tmp:
        env = configure(Path(tmp), args.backend)
        ids = populate()
        from django.db import connections

        connections.close_all()
        port = free_port()
        server = serve(env, port)
        try:
            taken = shoot(f"http://127.0.0.1:{port}", ids, out)
        finally:
            server.terminate()
            server.wait(10)
    for path in taken:
        size = path.stat().st_size
        flag = "" if size <= MAX_BYTES else f"  (over {MAX_BYTES // 1024} KB)"
        print(f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}  {size // 1024} KB{flag}")


if __name__ == "__main__":
    main()
