"""A newcomer's first hour on `make run`'s own launcher, in Chromium, with the `openai` SDK beside it.

From an empty store, as the Makefile does it: migrate, `manage.py demo --summary FILE`, then
`python -m config.serve HOST:PORT --summary FILE` (the task cluster and the web server together).
Then: the login is repeated in a box below the start-up lines; the first login shows no red on the
shipped demo; the collection form's help reads as written; a folder collection syncs by itself and
follows an added, a changed and a deleted file without a click; switching Per reader queues its own
rebuild; and the OpenAI SDK sees a PDF result's pages.
"""

import os
import re
import signal
import sys
import time

import httpx
import pytest

from tests.test_walkthrough import (  # noqa: F401  (fixtures)
    ARTIFACTS,
    ROOT,
    chromium,
    free_port,
    process_env,
    processes,
    wait_for_server,
)

# Text is "red" when its colour is the admin's error red or ours (#ba2121, #843534), or a badge's
# background is the failed red (#f2dede): what a newcomer reads as "something is broken". The form's own
# Delete button is red by design and not a warning.
RED = """
() => Array.from(document.querySelectorAll('#content *')).filter((el) => {
  if (!el.offsetParent || !el.textContent.trim() || el.closest('.submit-row, .deletelink-box')) return false;
  const style = getComputedStyle(el);
  const reds = ['rgb(186, 33, 33)', 'rgb(132, 53, 52)', 'rgb(242, 222, 222)'];
  return reds.includes(style.color) || reds.includes(style.backgroundColor);
}).map((el) => el.textContent.trim().slice(0, 200))
"""


def search_texts(base: str, key: str, collection: str, question: str) -> str:
    answer = httpx.post(
        f"{base}/api/v1/collections/{collection}/search",
        headers={"Authorization": f"Bearer {key}"},
        json={"question": question, "min_score": 0, "most": 10},
        timeout=60,
    )
    if answer.status_code != 200:
        return ""
    return " ".join(p["text"] for p in answer.json()["paragraphs"])


def wait_until(condition, seconds: float, every: float = 2.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(every)
    return condition()


@pytest.mark.browser
@pytest.mark.model
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_newcomers_first_hour_on_make_runs_launcher(processes, chromium, tmp_path, request):  # noqa: F811
    from openai import OpenAI

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    root = tmp_path / "knowledge"
    summary = tmp_path / "start-up-summary.txt"
    # A one-minute period, so that the sync is seen within the test; the default is SYNC_EVERY, 5.
    env = process_env(KNOWLEDGE_ROOT=str(root), DATA_DIR=str(tmp_path), SYNC_EVERY="1")

    processes.run("migrate", "--noinput", env=env)
    demo = processes.run(
        "demo", "--host", "127.0.0.1", "--port", str(port), "--summary", str(summary), env=env
    )
    assert demo.stdout == ""  # said once, labelled, on stderr
    password = re.search(r'user "admin", password \(shown once\): (\S+)', demo.stderr).group(1)
    key = re.search(r"API key:  (\S+)", demo.stderr).group(1)
    launcher = processes.start(
        "serve",
        command=[sys.executable, "-m", "config.serve", f"127.0.0.1:{port}", "--summary", str(summary)],
        env=env,
    )
    wait_for_server(base, processes, "serve")
    assert wait_until(lambda: not summary.exists(), 30, every=0.5), processes.tail("serve")
    console = (tmp_path / "serve.log").read_text()
    box = console[console.rindex("┌") :]
    assert password in box and key in box and f"{base}/admin/" in box  # below the start-up lines

    page = chromium.new_page(base_url=base, viewport={"width": 1280, "height": 900})
    page.set_default_timeout(20_000)
    try:
        page.goto("/admin/")
        page.fill("#id_username", "admin")
        page.fill("#id_password", password)
        page.click("#login-form input[type=submit]")
        page.wait_for_selector("#user-tools")
        # The first login: the shipped demo, its list and its page, with nothing in red.
        page.goto("/admin/collections_app/collection/")
        assert page.evaluate(RED) == []
        page.click("text=handbook")
        page.wait_for_selector("#known-answers")
        assert page.evaluate(RED) == []
        assert "KNOWLEDGE_<NAME>_FOLDER" in page.inner_text("#content")  # help text as written

        # A folder collection, added as the README says, syncs by itself: no Rebuild pressed.
        folder = root / "demo" / "policies"
        folder.mkdir(parents=True)
        (folder / "expenses.md").write_text("# Expenses\n\nClient dinners are reimbursed up to 60 euros.\n")
        (folder / "security.md").write_text("# Security\n\nA lost laptop is reported within one hour.\n")
        (folder / "parking.md").write_text("# Parking\n\nThe car park closes at ten in the evening.\n")
        page.goto("/admin/collections_app/collection/add/")
        page.select_option("#id_agent", label="demo")
        page.fill("#id_name", "policies")
        page.select_option("#id_folder", "policies")
        assert page.is_checked("#id_sync")
        page.fill("#id_sync_every", "1")
        page.click("input[name=_continue]")
        page.wait_for_selector("#rebuild-button")
        assert wait_until(lambda: "60 euros" in search_texts(base, key, "policies", "client dinners"), 240)

        # Add, change and delete in the folder; the next checks follow all three.
        (folder / "travel.md").write_text("# Travel\n\nTrains are booked in standard class.\n")
        (folder / "expenses.md").write_text("# Expenses\n\nClient dinners are reimbursed up to 75 euros.\n")
        (folder / "parking.md").unlink()

        def followed() -> bool:
            texts = search_texts(base, key, "policies", "dinners trains car park")
            return "standard class" in texts and "75 euros" in texts and "car park closes" not in texts

        assert wait_until(followed, 240), search_texts(base, key, "policies", "dinners trains car park")

        # Per reader, switched on the collection's page, queues its own rebuild and says so.
        page.reload()
        page.check("#id_per_reader")
        page.click("input[name=_continue]")
        page.wait_for_selector("ul.messagelist")
        said = page.inner_text("ul.messagelist")
        number = re.search(r"Build (\d+) of policies queued", said)
        assert number, said
        auth = {"Authorization": f"Bearer {key}"}

        def rebuilt() -> bool:
            latest = httpx.get(f"{base}/api/v1/collections/policies/builds?limit=1", headers=auth, timeout=30)
            return latest.json()[0]["status"] == "succeeded"

        assert wait_until(rebuilt, 120)
        page.reload()
        assert page.locator("[data-role=not-searchable]").count() == 0
        assert page.evaluate(RED) == []
    except Exception:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
        raise

    # The OpenAI SDK sees the pages of the demo's PDF.
    sdk = OpenAI(api_key=key, base_url=f"{base}/v1", max_retries=0)
    results = list(
        sdk.vector_stores.search(
            "handbook", query="Are safety glasses mandatory in the workshop?", max_num_results=3
        )
    )
    pdf = [r for r in results if r.filename == "safety.pdf"]
    assert pdf and pdf[0].attributes["pages"] in ("1", "2", "1-2") and pdf[0].ragsite["pages"]

    # The console stayed quiet: no favicon warnings, no schedule lines at INFO.
    console = (tmp_path / "serve.log").read_text()
    assert "Not Found: /favicon.ico" not in console and "from schedule" not in console
    os.killpg(launcher.pid, signal.SIGTERM)
    launcher.wait(timeout=45)
    assert launcher.returncode == 0, processes.tail("serve")
