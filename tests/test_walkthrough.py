"""The first hour of a new user, walked as the README tells it, against real processes.

From an empty store: `make run`'s steps (migrate, the demo with its admin login and key, a task
cluster, runserver with DEBUG off) as subprocesses; then in Chromium: log in with the printed
password on a styled admin, add a collection from a folder dropped under KNOWLEDGE_ROOT, press
Rebuild and watch the bar reach 100 %, label a paragraph, search in the playground as a reader;
then the same collection's build status and a search over the API and over MCP, with the key
the demo printed. Nothing here is done in a way the README does not say.
"""

import json
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from django.db import connection

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
ARTIFACTS = ROOT / "test-artifacts"
# The admin's header colour from Django's own stylesheet: proof the CSS was served and applied.
ADMIN_HEADER_BG = "rgb(65, 118, 144)"

POLICIES = {
    "expenses.md": "# Expenses\n\nClient dinners are reimbursed up to 60 euros per person.\n\n"
    "## Travel\n\nTrains are booked in standard class for trips under four hours.\n",
    "security.md": "# Security\n\nA lost laptop is reported to the security desk within one hour.\n",
}


def database_url() -> str:
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    return f"postgres://{s['USER'] or ''}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def process_env(**extra) -> dict:
    """The environment `make run` gives its processes: DEBUG off, the deployment's own variables."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DEBUG", "DJANGO_ALLOW_ASYNC_UNSAFE")
        and not (k.startswith("KNOWLEDGE_") and k.endswith("_FOLDER"))
    }
    # `make run` writes a random SECRET_KEY into .env before anything starts; so does this.
    env.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    env.update({"DATABASE_URL": database_url(), "Q_WORKERS": "1", **extra})
    return env


class Processes:
    """Subprocesses started in their own process groups, stopped (and reported on) at the end."""

    def __init__(self, logs: Path):
        self.logs, self.running = logs, []

    def run(self, *args, env) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"manage.py {' '.join(args)}: {done.stderr[-3000:]}"
        return done

    def start(self, name, *args, env, command=None) -> subprocess.Popen:
        log = (self.logs / f"{name}.log").open("w+")
        process = subprocess.Popen(
            command or [sys.executable, "manage.py", *args],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.running.append((name, process))
        return process

    def tail(self, name) -> str:
        return (self.logs / f"{name}.log").read_text()[-3000:]

    def stop(self):
        for _name, process in reversed(self.running):
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def wait_for_server(base: str, processes: Processes, name: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/api/v1/openapi.json", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    pytest.fail(f"{name} never answered:\n{processes.tail(name)}")


def header_background(page) -> str:
    return page.evaluate("getComputedStyle(document.querySelector('#header')).backgroundColor")


@pytest.fixture
def processes(tmp_path):
    started = Processes(tmp_path)
    yield started
    started.stop()


@pytest.fixture
def chromium(request, tmp_path, monkeypatch):
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


def mcp_tool(base: str, key: str, name: str, arguments: dict) -> dict:
    response = httpx.post(
        f"{base}/mcp",
        timeout=60,
        headers={
            "Authorization": f"Bearer {key}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": "2025-06-18",
        },
        json={
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": arguments},
        },
    )
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert not result.get("isError"), result
    return result["structuredContent"]


@pytest.mark.browser
@pytest.mark.model
@pytest.mark.django_db(transaction=True)
def test_from_make_run_to_a_labelled_rebuilt_searched_collection(processes, chromium, tmp_path, request):
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    root = tmp_path / "knowledge"
    env = process_env(KNOWLEDGE_ROOT=str(root))

    # make run: migrate, demo (agent, key, handbook, admin login), task cluster, web server.
    processes.run("migrate", "--noinput", env=env)
    demo = processes.run("demo", "--host", "127.0.0.1", "--port", str(port), env=env)
    key = re.search(r"API key:  (\S+)", demo.stderr).group(1)  # said once, labelled
    password = re.search(r'user "admin", password \(shown once\): (\S+)', demo.stderr).group(1)
    assert f"{base}/admin/" in demo.stderr and f"Bearer {key}" in demo.stderr
    processes.start("qcluster", "qcluster", env=env)
    processes.start("runserver", "runserver", f"127.0.0.1:{port}", env=env)
    wait_for_server(base, processes, "runserver")

    page = chromium.new_page(base_url=base, viewport={"width": 1280, "height": 900})
    page.set_default_timeout(20_000)
    try:
        # The README: log in at /admin/ as admin with the printed password. The admin is styled.
        page.goto("/admin/")
        assert "/admin/login/" in page.url
        assert header_background(page) == ADMIN_HEADER_BG
        page.fill("#id_username", "admin")
        page.fill("#id_password", password)
        page.click("#login-form input[type=submit]")
        page.wait_for_selector("#user-tools")

        # Drop a folder beside the demo's handbook, then add a collection choosing it.
        for name, text in POLICIES.items():
            (root / "demo" / "policies").mkdir(parents=True, exist_ok=True)
            (root / "demo" / "policies" / name).write_text(text)
        page.goto("/admin/collections_app/collection/add/")
        page.select_option("#id_agent", label="demo")
        page.fill("#id_name", "policies")
        page.select_option("#id_folder", "policies")
        page.fill("#id_built_from", "the policies share")
        page.check("#id_per_reader")
        page.click("input[name=_continue]")
        page.wait_for_selector("#rebuild-button")

        # Rebuild; the task cluster carries it out while the bar fills without a reload.
        page.click("#rebuild-button")
        page.wait_for_selector("ul.messagelist")
        page.wait_for_function(
            "document.querySelector('#build-progress [role=progressbar]').getAttribute('aria-valuenow') === "
            "'100'",
            timeout=90_000,
        )
        assert page.inner_text("#build-progress [data-role=status]") == "succeeded"

        # Label the paragraph about lost laptops "security".
        page.goto("/admin/collections_app/paragraph/?q=laptop")
        page.check('input[name="_selected_action"] >> nth=0')
        page.select_option("select[name=action]", "add_labels_action")
        page.click("button[name=index]")
        page.wait_for_selector("#label-form")
        page.fill("#id_new_labels", "security")
        page.click("#label-apply")
        page.wait_for_selector("ul.messagelist")
        assert "Added security to 1 paragraph" in page.inner_text("ul.messagelist")

        # A reader holding the label (the README's create_reader), then the playground as that reader.
        processes.run("create_reader", "alice@example.com", "--label", "security", env=env)
        page.goto("/admin/collections_app/collection/")
        page.click("text=Search playground")
        page.select_option("#id_collection", label="demo / policies")
        page.fill("#id_question", "What do I do if I lose my laptop?")
        page.select_option("#id_reader", "alice@example.com")
        page.fill("#id_min_score", "0")
        page.click("#playground-submit")
        result = page.wait_for_selector("#playground-result")
        assert "security desk within one hour" in result.inner_text()
    except Exception:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
        raise

    # The same collection over the API, with the key the demo printed.
    auth = {"Authorization": f"Bearer {key}"}
    builds = httpx.get(f"{base}/api/v1/collections/policies/builds?limit=1", headers=auth, timeout=30)
    assert builds.status_code == 200, builds.text
    latest = builds.json()[0]
    assert latest["status"] == "succeeded" and latest["passages"] >= 2 and latest["refused"] == []
    assert latest["model"] == "all-MiniLM-L6-v2" and str(root) not in builds.text
    found = httpx.post(
        f"{base}/api/v1/collections/policies/search",
        headers=auth,
        timeout=60,
        json={"question": "What do I do if I lose my laptop?", "reader": "alice@example.com", "min_score": 0},
    )
    assert found.status_code == 200, found.text
    assert "security desk" in found.json()["paragraphs"][0]["text"]

    # ... and over MCP.
    status = mcp_tool(base, key, "build_status", {"collection": "policies"})
    assert status["build"] == latest["build"] and status["status"] == "succeeded"
    assert status["passages"] == latest["passages"] and status["refused"] == [] and status["model"]
    listed = mcp_tool(base, key, "collections", {})
    assert {c["name"]: c["last_build"]["status"] for c in listed["collections"]} == {
        "handbook": "succeeded",
        "policies": "succeeded",
    }
    searched = mcp_tool(
        base,
        key,
        "search",
        {"collection": "policies", "question": "lost laptop", "reader": "alice@example.com", "min_score": 0},
    )
    assert "security desk" in searched["paragraphs"][0]["text"]


@pytest.mark.browser
@pytest.mark.parametrize("server", ["runserver", "uvicorn", "gunicorn"])
def test_the_admin_and_the_api_docs_are_styled_with_debug_off_offline(processes, chromium, tmp_path, server):
    """Static files come from the web process itself under `make run`'s runserver and the README's
    gunicorn and uvicorn lines."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = process_env(DATABASE_URL=f"sqlite:///{tmp_path / 'store.sqlite3'}")
    processes.run("migrate", "--noinput", env=env)
    if server == "runserver":
        processes.start(server, "runserver", f"127.0.0.1:{port}", env=env)
    elif server == "gunicorn":
        processes.start(
            server,
            env={**env, "WEB_BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": "2"},
            command=[str(Path(sys.executable).parent / "gunicorn"), "-c", "python:config.gunicorn_conf"],
        )
    else:
        processes.start(
            server,
            env=env,
            command=[
                str(Path(sys.executable).parent / "uvicorn"),
                "config.asgi:application",
                "--port",
                str(port),
            ],
        )
    wait_for_server(base, processes, server)
    context = chromium.new_context(base_url=base)
    # Offline: anything not served by this server is refused, so a CDN would leave the docs blank.
    context.route(re.compile(r"^(?!" + re.escape(base) + ")"), lambda route: route.abort())
    page = context.new_page()
    page.goto("/admin/login/")
    assert header_background(page) == ADMIN_HEADER_BG
    page.goto("/api/v1/docs")
    page.wait_for_selector("#operations-collections-search_collection", timeout=20_000)
    assert "Search a collection" in page.inner_text("#swagger-ui")
    context.close()
    assert json.loads(httpx.get(f"{base}/api/v1/openapi.json").text)["info"]["title"] == "ragsite"
