"""Playwright with Debian's chromium against the live server: the `page` fixture and the steps tests share.

A test using `page` is skipped, with the reason, when /usr/bin/chromium is missing. A failing test
leaves a full-page screenshot in `test-artifacts/<test name>.png`.
"""

from pathlib import Path

import pytest
from django.db import connections

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
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


def screenshot(page, name: str) -> Path:
    """A full-page screenshot kept in test-artifacts/widths/ (the two widths the admin is checked at)."""
    folder = ARTIFACTS / "widths"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def horizontal_overflow(page) -> int:
    """How many pixels the page is wider than the window: 0 when nothing needs a sideways scroll."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
