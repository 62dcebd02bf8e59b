"""A real Prometheus (Debian's `prometheus`) scrapes a real gunicorn of two workers in the multiprocess
mode, with the bearer token, and answers a counter back through its HTTP API: every search made, which
ever worker answered it, summed.

Skipped, saying why, where the `prometheus` binary is missing (.ci/run installs it where apt works).
"""

import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from tests.conftest import HANDBOOK
from tests.test_walkthrough import Processes, free_port, process_env

GUNICORN = Path(sys.executable).parent / "gunicorn"
PROMETHEUS = shutil.which("prometheus")
TOKEN = "scrape-token-for-the-test-0123456789"
MAX_SEARCHES = 60

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None, reason="Debian's prometheus is not installed (apt-get install -y prometheus)"
    ),
]


@pytest.fixture
def served(knowledge_folder, transactional_db, settings, tmp_path):
    """gunicorn, two workers, PROMETHEUS_MULTIPROC_DIR, a built handbook: (base, key, access log)."""
    agent, raw = create_agent(agent_id="scraped", name="Scraped")
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK, agent="scraped")
    assert build_collection(collection=collection).status == "succeeded"
    port = free_port()
    env = process_env(
        EMBED_BACKEND=settings.EMBED_BACKEND,
        INDEX_DIR=str(tmp_path / "node-indexes"),
        DATA_DIR=str(tmp_path / "data"),
        WEB_CONCURRENCY="2",
        WEB_THREADS="2",
        WEB_BIND=f"127.0.0.1:{port}",
        METRICS_TOKEN=TOKEN,
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "prometheus-multiproc"),
    )
    processes = Processes(tmp_path)
    access = tmp_path / "access.log"
    command = [str(GUNICORN), "-c", "python:config.gunicorn_conf", "--access-logfile", str(access)]
    processes.start("gunicorn", env=env, command=[*command, "--access-logformat", "%(p)s %(U)s %(s)s"])
    deadline = time.monotonic() + 60
    while processes.tail("gunicorn").count("Booting worker") < 2:
        if time.monotonic() > deadline or processes.running[0][1].poll() is not None:
            processes.stop()
            pytest.fail(f"gunicorn did not boot two workers:\n{processes.tail('gunicorn')}")
        time.sleep(0.2)
    try:
        yield f"http://127.0.0.1:{port}", raw, access
    finally:
        processes.stop()


def start_prometheus(target: str, tmp_path: Path) -> tuple[subprocess.Popen, str]:
    port = free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n"
        "  - job_name: ragsite\n"
        "    metrics_path: /metrics\n"
        "    authorization:\n"
        f"      credentials: {TOKEN}\n"
        "    static_configs:\n"
        f"      - targets: ['{target}']\n",
        encoding="utf-8",
    )
    log = (tmp_path / "prometheus.log").open("w+")
    process = subprocess.Popen(
        [
            PROMETHEUS,
            f"--config.file={config}",
            f"--storage.tsdb.path={tmp_path / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    return process, f"http://127.0.0.1:{port}"


def query(prometheus: str, expression: str) -> float | None:
    try:
        answer = httpx.get(f"{prometheus}/api/v1/query", params={"query": expression}, timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return None
    result = answer.get("data", {}).get("result", [])
    return float(result[0]["value"][1]) if result else None


def test_prometheus_scrapes_the_workers_sum_and_answers_the_search_counter(served, tmp_path):
    base, raw, access = served
    assert httpx.get(f"{base}/metrics", timeout=10).status_code == 401  # no token, not even from loopback
    searches, workers = 0, set()
    while len(workers) < 2 and searches < MAX_SEARCHES:  # until both workers have answered some
        response = httpx.post(
            f"{base}/api/v1/collections/handbook/search",
            json={"question": "how many days of annual leave carry over"},
            headers={"Authorization": f"Bearer {raw}", "Connection": "close"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        searches += 1
        time.sleep(0.05)  # the access log line is written after the answer
        workers = {line.split()[0] for line in access.read_text().splitlines() if "/search 200" in line}
    assert len(workers) == 2, f"one worker answered all {searches} searches"
    prometheus, api = start_prometheus(base.removeprefix("http://"), tmp_path)
    try:
        deadline, found = time.monotonic() + 90, None
        while time.monotonic() < deadline:
            found = query(api, "sum(ragsite_searches_total)")
            if found is not None and found >= searches:
                break
            assert prometheus.poll() is None, (tmp_path / "prometheus.log").read_text()
            time.sleep(1)
        assert found == searches, (found, (tmp_path / "prometheus.log").read_text()[-2000:])
        routed = query(
            api,
            'sum(ragsite_http_requests_total{route="api/v1/collections/<name>/search",method="POST",status="200"})',
        )
        assert routed == searches
        assert query(api, 'up{job="ragsite"}') == 1.0
    finally:
        prometheus.terminate()
        prometheus.wait(timeout=30)
