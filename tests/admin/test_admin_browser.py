"""The admin in a real browser: Playwright driving Debian's chromium against the live server.

Run with `pytest -m browser`. Needs `/usr/bin/chromium` (`apt-get install -y chromium`);
without it every test here is skipped with that reason. A failing test leaves a
full-page screenshot in `test-artifacts/<test name>.png`.
"""

import threading
import time
from pathlib import Path

import pytest
from django.db import connection, connections

from collections_app.models import BuildRun, Document, Label, Paragraph
from collections_app.services.agents import authenticate, create_collection
from collections_app.services.builds import build_collection
from ragsite import embedding

from .conftest import HANDBOOK

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def page(request, live_server, monkeypatch):
    """A chromium page on the live server; screenshots itself when the test fails."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)")
    # Playwright's sync API keeps an event loop running in this thread; the ORM calls
    # the test makes between browser steps are still plain synchronous calls.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        context = browser.new_context(base_url=live_server.url, viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15_000)
        try:
            yield page
        finally:
            report = getattr(request.node, "rep_call", None)
            if report is None or report.failed:
                ARTIFACTS.mkdir(exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
            browser.close()
            # While Playwright's loop runs, asgiref hands this thread's ORM calls a context-local
            # connection of their own; close it here, or PostgreSQL cannot drop the test database.
            connections.close_all()


def log_in(page, username="admin", password="password"):
    page.goto("/admin/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("#login-form input[type=submit]")
    page.wait_for_selector("#user-tools")


def run_action(page, action: str):
    page.select_option("select[name=action]", action)
    page.click("button[name=index]")


def messages_text(page) -> str:
    return page.inner_text("ul.messagelist")


def test_log_in(page, admin_user):
    page.goto("/admin/collections_app/collection/")
    assert "/admin/login/" in page.url
    page.fill("#id_username", "admin")
    page.fill("#id_password", "wrong password")
    page.click("#login-form input[type=submit]")
    assert "Please enter the correct username and password" in page.inner_text(".errornote")
    page.fill("#id_password", "password")
    page.click("#login-form input[type=submit]")
    page.wait_for_selector("#changelist")
    assert page.url.endswith("/admin/collections_app/collection/")


def test_label_paragraphs_in_bulk_through_the_intermediate_page(page, admin_user, handbook):
    Label.objects.create(name="hr")
    badges = list(Paragraph.objects.filter(collection=handbook, text__icontains="badges").values_list("pk", flat=True))
    assert len(badges) == 2
    log_in(page)
    page.goto(f"/admin/collections_app/paragraph/?collection__id__exact={handbook.pk}")
    for pk in badges:
        page.check(f'input[name="_selected_action"][value="{pk}"]')
    run_action(page, "add_labels_action")

    page.wait_for_selector("#label-form")
    assert "2 paragraphs" in page.inner_text("#content-main")
    page.check('input[name="labels"] >> nth=0')  # hr, the only label so far
    page.fill("#id_new_labels", "security")
    page.click("#label-apply")

    page.wait_for_selector("#changelist")
    assert "Added hr, security to 2 paragraph(s)" in messages_text(page)
    for paragraph in Paragraph.objects.filter(pk__in=badges):
        assert set(paragraph.labels.values_list("name", flat=True)) == {"hr", "security"}
    assert Paragraph.objects.filter(labels__isnull=False).distinct().count() == 2
    # The "unlabelled" filter now leaves them out.
    page.goto(f"/admin/collections_app/paragraph/?collection__id__exact={handbook.pk}&unlabelled=yes")
    listed = page.inner_text("#result_list")
    assert "badges" not in listed.lower() and "five days" in listed


def test_rebuild_and_the_bar_reads_100_percent(page, admin_user, handbook):
    log_in(page)
    page.goto(f"/admin/collections_app/collection/{handbook.pk}/change/")
    page.click("#rebuild-button")  # django-q runs synchronously in tests: the build is done when the page returns
    page.wait_for_selector("ul.messagelist")
    run = handbook.runs.first()
    assert f"Build {run.pk} of handbook requested (succeeded)" in messages_text(page)
    bar = page.locator("#build-progress [role=progressbar]")
    assert bar.get_attribute("aria-valuenow") == "100"
    assert page.inner_text("#build-progress [data-role=percent]") == "100 %"
    assert page.inner_text("#build-progress [data-role=status]") == "succeeded"
    assert page.locator("table.rs-history tbody tr").count() == 2


class SlowEmbedder:
    """The test embedder, held at a gate and then slowed down, so that a build's progress can be watched."""

    def __init__(self, inner, delay):
        self.inner, self.delay, self.gate = inner, delay, threading.Event()

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed_with_usage(self, texts):
        self.gate.wait(30)
        time.sleep(self.delay)
        return self.inner.embed_with_usage(texts)


def test_the_bar_fills_while_a_build_runs_without_reloading(page, admin_user, agent, knowledge_folder, settings,
                                                            monkeypatch):
    collection = create_collection(agent=agent, name="slow", method="fixed", size=60)
    knowledge_folder("slow", HANDBOOK)
    settings.EMBED_BATCH_SIZE = 1
    slow = SlowEmbedder(embedding.get_embedder(), delay=0.4)
    monkeypatch.setattr(embedding, "get_embedder", lambda backend=None: slow)

    def build():
        try:
            build_collection(collection=collection, requested_by="test")
        finally:
            connection.close()

    log_in(page)
    worker = threading.Thread(target=build, daemon=True)
    worker.start()
    try:
        # The documents are read; the build now waits at the embedder's gate with its bar half full.
        deadline = time.monotonic() + 15
        while not collection.runs.filter(status=BuildRun.RUNNING, paragraphs_total__gt=0).exists():
            assert time.monotonic() < deadline, "the build never reached its embedding stage"
            time.sleep(0.05)
        page.goto(f"/admin/collections_app/collection/{collection.pk}/change/")
        page.evaluate("window.__notReloaded = true")
    finally:
        slow.gate.set()
    bar = page.locator("#build-progress [role=progressbar]")
    seen = []
    deadline = time.monotonic() + 30
    while not seen or seen[-1] != 100:
        assert time.monotonic() < deadline, f"the bar stopped at {seen[-1:]}"
        value = int(bar.get_attribute("aria-valuenow"))
        if not seen or seen[-1] != value:
            seen.append(value)
        time.sleep(0.1)
    worker.join(10)
    assert seen[0] == 50 and len(seen) >= 3, seen  # read, then embedding step by step
    assert seen == sorted(seen), seen  # never backwards
    assert page.evaluate("window.__notReloaded") is True
    page.wait_for_function("document.querySelector('#build-progress [data-role=status]').textContent === 'succeeded'")
    assert page.inner_text("#build-progress [data-role=percent]") == "100 %"
    assert page.locator("#build-progress [data-role=reload]").is_visible()
    assert collection.runs.get().status == BuildRun.SUCCEEDED


def test_approve_a_document_that_needs_review(page, admin_user, conflicting):
    log_in(page)
    page.goto("/admin/collections_app/document/")
    page.click("#changelist-filter >> text=needs review")
    page.wait_for_selector("#result_list")
    assert page.locator("#result_list tbody tr").count() == 2
    assert "except for its numbers" in page.inner_text("#result_list")
    newer = conflicting.documents.get(name="policy-2024.md")
    page.check(f'input[name="_selected_action"][value="{newer.pk}"]')
    run_action(page, "approve")
    page.wait_for_selector("ul.messagelist")
    assert "Approved 1 document(s): policy-2024.md" in messages_text(page)
    newer.refresh_from_db()
    assert newer.status == Document.ACTIVE and newer.approved_fingerprint == newer.fingerprint
    assert page.locator("#result_list tbody tr").count() == 1  # still filtered on "needs review"

    older = conflicting.documents.get(name="policy-2023.md")
    page.goto(f"/admin/collections_app/document/{older.pk}/change/")
    page.click("#approve-button")
    page.wait_for_selector("ul.messagelist")
    older.refresh_from_db()
    assert older.status == Document.ACTIVE


def test_the_playground_shows_a_result(page, admin_user, handbook):
    never = create_collection(agent=handbook.agent, name="never")
    log_in(page)
    page.goto("/admin/collections_app/collection/")
    page.click("text=Search playground")
    page.select_option("#id_collection", str(handbook.pk))
    page.fill("#id_question", "how many days of annual leave carry over")
    page.click("#playground-submit")
    result = page.wait_for_selector("#playground-result")
    assert "capped at five days" in result.inner_text()
    assert page.inner_text("[data-role=mode]") == "hybrid"
    assert page.inner_text("[data-role=floor]") == "0.25"
    assert page.inner_text("[data-role=refused]").startswith("null")
    assert int(page.inner_text("tr.rs-result >> nth=0 >> [data-role=passages]")) >= 1
    assert float(page.inner_text("tr.rs-result >> nth=0 >> [data-role=score]")) >= 0.25

    page.fill("#id_question", "x" * 10)
    page.select_option("#id_collection", str(never.pk))
    page.click("#playground-submit")
    page.wait_for_selector("ul.messagelist")
    assert "has never been built" in messages_text(page)


def test_upload_a_document_and_rebuild(page, admin_user, handbook):
    log_in(page)
    page.goto(f"/admin/collections_app/collection/{handbook.pk}/change/")
    page.click("text=upload documents…")
    page.set_input_files("#id_files", files=[
        {"name": "parking.md", "mimeType": "text/markdown", "buffer": b"# Parking\n\nVisitors park on level two.\n"},
        {"name": "tool.exe", "mimeType": "application/octet-stream", "buffer": b"MZ"},
    ])
    page.check("#id_rebuild")
    page.click("#upload-submit")
    page.wait_for_selector("ul.messagelist")
    text = messages_text(page)
    assert "Uploaded to handbook: parking.md" in text and '"tool.exe" is not a supported type' in text
    assert page.locator("#build-progress [role=progressbar]").get_attribute("aria-valuenow") == "100"
    assert Paragraph.objects.filter(collection=handbook, text__contains="level two").exists()


def test_issue_a_key_shown_once(page, admin_user, agent):
    log_in(page)
    page.goto(f"/admin/collections_app/agent/{agent.pk}/change/")
    page.click("#issue-key-button")
    raw = page.inner_text("[data-role=raw-key]")
    assert authenticate(raw).agent == agent
    page.goto(f"/admin/collections_app/agent/{agent.pk}/change/")
    assert raw not in page.content()
