"""A busy store still answers (issue 24, item 7): while another process holds SQLite's write lock,
searches answer from what is committed and never wait on it, and a request that must write answers
503 with Retry-After in the one error shape, never 500."""

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from collections_app.models import ApiKey, ReadAudit
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection

pytestmark = pytest.mark.django_db(transaction=True)

BADGE = {"text": "The badge office opens at nine."}
HOLD = """
import sqlite3, sys
store = sqlite3.connect(sys.argv[1], timeout=0, isolation_level=None)
store.execute("BEGIN IMMEDIATE")
print("held", flush=True)
sys.stdin.readline()  # until the test says so (or dies: EOF)
store.execute("ROLLBACK")
"""


@pytest.fixture
def held_store(monkeypatch):
    """Another process holding the store's write lock; this connection waits at most 1 s for it."""
    if connection.vendor != "sqlite":
        pytest.skip("the write lock is SQLite's")
    monkeypatch.setitem(connection.settings_dict["OPTIONS"], "timeout", 1)
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout = 1000")
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, connection.settings_dict["NAME"]],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        if holder.poll() is None:
            holder.stdin.write("done\n")
            holder.stdin.flush()
        holder.wait(timeout=30)


@pytest.fixture
def built(knowledge_folder):
    agent, raw = create_agent(agent_id="busy")
    knowledge_folder(
        "handbook", {"leave.md": "# Leave\n\nCarry-over is capped at five days a year.\n"}, agent="busy"
    )
    collection = create_collection(agent=agent, name="handbook", method="fixed")
    build_collection(collection=collection)
    # A key last used two minutes ago: this request is the one that would record its use.
    ApiKey.objects.filter(agent=agent).update(last_used_at=timezone.now() - timedelta(minutes=2))
    return agent, raw


def post(client, raw, path, body):
    return client.post(
        path,
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
        HTTP_ACCEPT="application/json",
    )


def test_searches_answer_and_writes_say_retry_while_another_process_holds_the_lock(
    client, built, held_store, settings
):
    agent, raw = built
    before = ApiKey.objects.get(agent=agent).last_used_at
    search = post(client, raw, "/api/v1/collections/handbook/search", {"question": "carry-over days"})
    assert search.status_code == 200, search.content
    assert "five days" in search.json()["paragraphs"][0]["text"]
    over_mcp = post(
        client,
        raw,
        "/mcp",
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": "search",
                "arguments": {"collection": "handbook", "question": "carry-over days"},
            },
        },
    )
    assert over_mcp.status_code == 200 and over_mcp.json()["result"]["isError"] is False, over_mcp.content
    # The key's use was not recorded: skipped, not waited for.
    assert ApiKey.objects.get(agent=agent).last_used_at == before
    # Nor were the two reads' audit entries: they wait, on disk, in this process's spool.
    assert ReadAudit.objects.count() == 0
    assert len((settings.AUDIT_SPOOL_DIR / f"{os.getpid()}.jsonl").read_text().splitlines()) == 2

    for path, body in [("/api/v1/memory/memories", BADGE), ("/api/v1/collections/handbook/build", {})]:
        refused = post(client, raw, path, body)
        assert refused.status_code == 503, (path, refused.content)
        assert refused["Retry-After"] == "5"
        assert refused.json()["error"]["code"] == "store_busy"
    stored_over_mcp = post(
        client,
        raw,
        "/mcp",
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "store", "arguments": BADGE}},
    )
    result = stored_over_mcp.json()["result"]
    assert result["isError"] is True and '"store_busy"' in result["content"][0]["text"]

    held_store.stdin.write("done\n")
    held_store.stdin.flush()
    held_store.wait(timeout=30)
    assert post(client, raw, "/api/v1/collections/handbook/search", {"question": "leave"}).status_code == 200
    assert ApiKey.objects.get(agent=agent).last_used_at > before  # recorded once the lock was free
    # The spooled entries followed the first one written once the lock was free, in the order of the reads.
    assert list(ReadAudit.objects.order_by("at").values_list("channel", flat=True)) == ["api", "mcp", "api"]
    assert post(client, raw, "/api/v1/memory/memories", BADGE).status_code == 201
