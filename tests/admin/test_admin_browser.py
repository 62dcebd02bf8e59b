"""The admin in a real browser: Playwright driving Debian's chromium against the live server.

Run with `pytest -m browser`. Needs `/usr/bin/chromium` (`apt-get install -y chromium`);
without it every test here is skipped with that reason. A failing test leaves a
full-page screenshot in `test-artifacts/<test name>.png`.
"""

import threading
import time

import pytest
from django.db import connection
from playwright.sync_api import Error as PlaywrightError

from collections_app.models import BuildRun, Document, Label, Paragraph
from collections_app.services.agents import authenticate, create_collection
from collections_app.services.builds import build_collection
from ragsite import embedding

from . import browser
from .browser import log_in, messages_text, run_action
from .conftest import HANDBOOK

# The chromium page fixture lives in browser.py (and conftest); other test modules import it from here.
page = browser.page

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


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
    badges = list(
        Paragraph.objects.filter(collection=handbook, text__icontains="badges").values_list("pk", flat=True)
    )
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
    assert "Added hr, security to 2 paragraphs" in messages_text(page)
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
    page.click(
        "#rebuild-button"
    )  # django-q runs synchronously in tests: the build is done when the page returns
    page.wait_for_selector("ul.messagelist")
    run = handbook.runs.first()
    assert f"Build {run.number} of handbook requested (succeeded)" in messages_text(page)
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


def test_the_bar_fills_while_a_build_runs_without_reloading(
    page, admin_user, agent, knowledge_folder, settings, monkeypatch
):
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
    seen = []
    deadline = time.monotonic() + 30
    while not seen or seen[-1] != 100:
        assert time.monotonic() < deadline, f"the bar stopped at {seen[-1:]}"
        try:
            state = page.evaluate("""() => {
                const bar = document.querySelector('#build-progress [role=progressbar]');
                return bar && [Number(bar.getAttribute('aria-valuenow')), window.__notReloaded === true];
            }""")
        except PlaywrightError:  # the page reloading itself as the build ends
            state = None
        if state:
            value, not_reloaded = state
            if value < 100:
                assert not_reloaded, "the page reloaded while the build ran"
            if not seen or seen[-1] != value:
                seen.append(value)
        time.sleep(0.1)
    worker.join(10)
    assert seen[0] == 50 and len(seen) >= 3, seen  # read, then embedding step by step
    assert seen == sorted(seen), seen  # never backwards
    # Once the build has ended, the whole page shows it: status, counts, the current build, the history.
    page.wait_for_function("window.__notReloaded === undefined")
    page.wait_for_load_state()
    assert page.inner_text("#build-progress [data-role=status]") == "succeeded"
    assert page.inner_text("#build-progress [data-role=percent]") == "100 %"
    built = collection.runs.get()
    assert built.status == BuildRun.SUCCEEDED
    assert f"{built.passages} paragraphs" in page.inner_text(".field-current_build")
    assert page.inner_text(f'tr[data-build="{built.pk}"] [data-role=status]') == "succeeded"


def test_approve_a_document_that_needs_review(page, admin_user, conflicting):
    log_in(page)
    page.goto("/admin/collections_app/document/")
    page.click("#changelist-filter >> text=wholly or some paragraphs")
    page.wait_for_selector("#result_list")
    assert page.locator("#result_list tbody tr").count() == 2
    assert "except for its numbers" in page.inner_text("#result_list")
    newer = conflicting.documents.get(name="policy-2024.md")
    page.check(f'input[name="_selected_action"][value="{newer.pk}"]')
    run_action(page, "approve")
    page.wait_for_selector("ul.messagelist")
    assert "Approved 1 document: policy-2024.md" in messages_text(page)
    newer.refresh_from_db()
    assert newer.status == Document.ACTIVE and newer.approved_fingerprint == newer.fingerprint
    assert page.locator("#result_list tbody tr").count() == 1  # still filtered on waiting for review

    older = conflicting.documents.get(name="policy-2023.md")
    page.goto(f"/admin/collections_app/document/{older.pk}/change/")
    page.click("#approve-button")
    page.wait_for_selector("ul.messagelist")
    assert "policy-2023.md is approved" in messages_text(page)  # the file's name as written, not capitalised
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
    assert page.inner_text("[data-role=mode]").startswith("hybrid")
    assert page.inner_text("[data-role=floor]") == "0.22"
    assert page.inner_text("[data-role=refused]").startswith("not judged")
    first = page.locator(".rs-result >> nth=0")
    assert "paragraph" in first.locator("[data-role=passages]").inner_text()
    assert float(first.locator("[data-role=score]").inner_text()) >= 0.22

    page.fill("#id_question", "x" * 10)
    page.select_option("#id_collection", str(never.pk))
    page.click("#playground-submit")
    page.wait_for_selector("ul.messagelist")
    assert "Collection never has not been built yet: press Rebuild" in messages_text(page)


def test_upload_a_document_and_rebuild(page, admin_user, handbook):
    log_in(page)
    page.goto(f"/admin/collections_app/collection/{handbook.pk}/change/")
    page.click("text=upload documents…")
    page.set_input_files(
        "#id_files",
        files=[
            {
                "name": "parking.md",
                "mimeType": "text/markdown",
                "buffer": b"# Parking\n\nVisitors park on level two.\n",
            },
            {"name": "tool.exe", "mimeType": "application/octet-stream", "buffer": b"MZ"},
        ],
    )
    page.check("#id_rebuild")
    page.click("#upload-submit")
    page.wait_for_selector("ul.messagelist")
    text = messages_text(page)
    assert "Uploaded to handbook: parking.md" in text and '"tool.exe": unsupported type' in text
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
