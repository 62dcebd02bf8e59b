"""The web tier as README's "Production shape" runs it: gunicorn with config/gunicorn_conf.py.

A real gunicorn, its master warmed and forked into two workers, answers searches over the JSON API
and MCP `tools/call search` correctly from both workers, and keeps answering while an MCP
`build_status` waits on a build longer than gunicorn's own worker timeout.
"""

import importlib
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.core.exceptions import ImproperlyConfigured

from collections_app.models import BuildRun
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from tests.collections.test_mcp import ANSWER, LATEST, QUESTION
from tests.conftest import HANDBOOK
from tests.test_walkthrough import Processes, free_port, process_env

ROOT = Path(__file__).resolve().parents[1]
GUNICORN = Path(sys.executable).parent / "gunicorn"


def test_the_configuration_is_read_from_the_web_settings_and_refuses_no_workers_or_threads(settings):
    settings.WEB_CONCURRENCY, settings.WEB_THREADS, settings.WEB_BIND = 3, 2, "127.0.0.1:8123"
    conf = importlib.reload(importlib.import_module("config.gunicorn_conf"))
    assert (conf.workers, conf.threads, conf.bind) == (3, 2, ["127.0.0.1:8123"])
    assert (conf.worker_class, conf.preload_app, conf.wsgi_app) == (
        "gthread",
        True,
        "config.wsgi:application",
    )
    for name in ("WEB_CONCURRENCY", "WEB_THREADS"):
        setattr(settings, name, 0)
        with pytest.raises(ImproperlyConfigured, match=f"{name} must be at least 1, not 0"):
            importlib.reload(conf)
        setattr(settings, name, 2)


@pytest.fixture
def served(knowledge_folder, transactional_db, settings, tmp_path):
    """A built handbook in the test database and a gunicorn of two workers serving it:
    (base, key, access log, log)."""
    agent, raw = create_agent(agent_id="served", name="Served")
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK, agent="served")
    assert build_collection(collection=collection).status == "succeeded"
    port = free_port()
    access = tmp_path / "access.log"
    env = process_env(
        EMBED_BACKEND=settings.EMBED_BACKEND,
        # A node of its own: no index files yet, so its master fetches them from the store before binding.
        INDEX_DIR=str(tmp_path / "node-indexes"),
        DATA_DIR=str(tmp_path / "data"),
        WEB_CONCURRENCY="2",
        WEB_THREADS="4",
        WEB_BIND=f"127.0.0.1:{port}",
    )
    processes = Processes(tmp_path)
    # A worker timeout shorter than the build_status wait below: a sync worker would be killed mid-wait.
    processes.start(
        "gunicorn",
        env=env,
        command=[
            str(GUNICORN),
            "-c",
            "python:config.gunicorn_conf",
            "--timeout",
            "2",
            "--access-logfile",
            str(access),
            "--access-logformat",
            "%(p)s %(m)s %(U)s %(s)s",
        ],
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while processes.tail("gunicorn").count("Booting worker") < 2:
        if time.monotonic() > deadline or processes.running[0][1].poll() is not None:
            processes.stop()
            pytest.fail(f"gunicorn did not boot two workers:\n{processes.tail('gunicorn')}")
        time.sleep(0.2)
    try:
        yield base, raw, access, processes
    finally:
        processes.stop()


def api_search(base: str, key: str) -> dict:
    response = httpx.post(
        f"{base}/api/v1/collections/handbook/search",
        timeout=30,
        headers={"Authorization": f"Bearer {key}", "Connection": "close"},
        json={"question": QUESTION, "around": 0},
    )
    assert response.status_code == 200, response.text
    return response.json()


def mcp_call(base: str, key: str, name: str, arguments: dict, timeout: float = 30) -> dict:
    response = httpx.post(
        f"{base}/mcp",
        timeout=timeout,
        headers={
            "Authorization": f"Bearer {key}",
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": LATEST,
            "Connection": "close",
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


def answering_workers(access: Path, path: str) -> set[int]:
    """The pids that answered `path` with 200, from the access log (`<pid> METHOD PATH STATUS`)."""
    return {
        int(pid) for pid, seen in re.findall(r"<(\d+)> POST (\S+) 200", access.read_text()) if seen == path
    }


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_forked_workers_answer_api_and_mcp_searches_correctly(served):
    base, key, access, processes = served
    assert "warmed before forking: urlconf, lexical tables" in processes.tail("gunicorn")
    assert "search indexes warmed before binding: 1 fetched" in processes.tail("gunicorn")
    search_path = "/api/v1/collections/handbook/search"
    # New connections, several at once, until both workers have answered each kind at least once.
    with ThreadPoolExecutor(4) as pool:
        for _ in range(25):
            answers = list(pool.map(lambda _: api_search(base, key), range(4)))
            tools = list(
                pool.map(
                    lambda _: mcp_call(
                        base, key, "search", {"collection": "handbook", "question": QUESTION, "around": 0}
                    ),
                    range(4),
                )
            )
            for answer in answers + tools:
                assert (
                    ANSWER in answer["paragraphs"][0]["text"]
                    and answer["paragraphs"][0]["document"] == "leave.md"
                )
            if (
                len(answering_workers(access, search_path)) == 2
                and len(answering_workers(access, "/mcp")) == 2
            ):
                break
    assert len(answering_workers(access, search_path)) == 2, access.read_text()
    assert len(answering_workers(access, "/mcp")) == 2, access.read_text()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_build_status_wait_outlasts_the_worker_timeout_and_blocks_no_one(served):
    base, key, access, processes = served
    run = BuildRun.objects.create(
        collection_id=BuildRun.objects.get().collection_id, status=BuildRun.QUEUED, requested_by="test"
    )
    with ThreadPoolExecutor(3) as pool:
        started = time.monotonic()
        waits = [
            pool.submit(
                mcp_call,
                base,
                key,
                "build_status",
                {"collection": "handbook", "build": run.pk, "wait_seconds": 4},
            )
            for _ in range(2)
        ]
        time.sleep(0.5)
        # Both workers may hold a waiting request; their other threads still answer at once.
        for _ in range(4):
            asked = time.monotonic()
            assert ANSWER in api_search(base, key)["paragraphs"][0]["text"]
            assert time.monotonic() - asked < 2
        statuses = [wait.result() for wait in waits]
    assert time.monotonic() - started >= 4
    assert [status["status"] for status in statuses] == ["queued", "queued"]
    assert "WORKER TIMEOUT" not in processes.tail("gunicorn")
