"""On PostgreSQL a build or sync request waits for a row another transaction holds only briefly, then
answers 503 `store_busy` with Retry-After (it waited ~22 s, as long as the holder kept it)."""

import threading
import time

import pytest
from django.db import connection

from collections_app.services.agents import create_agent, create_collection

pytestmark = pytest.mark.django_db(transaction=True)


def _hold_row(table: str, pk: int, seconds: float, held: threading.Event):
    import psycopg

    s = connection.settings_dict
    with psycopg.connect(
        dbname=s["NAME"], user=s["USER"], host=s["HOST"] or "127.0.0.1", port=s["PORT"] or 5432
    ) as other:
        with other.transaction():
            other.execute(f"SELECT id FROM {table} WHERE id = %s FOR UPDATE", [pk])
            held.set()
            time.sleep(seconds)


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("post", "/api/v1/collections/handbook/build", None),
        ("put", "/api/v1/collections/handbook/sync", {"sync_every": 5}),
    ],
)
def test_a_build_or_sync_request_behind_a_held_row_answers_503_at_once(
    client, knowledge_folder, method, path, body
):
    if connection.vendor != "postgresql":
        pytest.skip("SQLite's busy timeout bounds the wait already (tests/test_busy_store.py)")
    agent, raw = create_agent(agent_id="locked")
    knowledge_folder("handbook", {"leave.md": "# Leave\n\nFive days carry over.\n"}, agent="locked")
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    held = threading.Event()
    holder = threading.Thread(target=_hold_row, args=("collections_app_collection", collection.pk, 8, held))
    holder.start()
    try:
        assert held.wait(10)
        started = time.monotonic()
        call = getattr(client, method)
        response = call(
            path,
            **({"data": body, "content_type": "application/json"} if body else {}),
            headers={"Authorization": f"Bearer {raw}"},
        )
        took = time.monotonic() - started
    finally:
        holder.join()
    assert response.status_code == 503, response.content
    assert response.json()["error"]["code"] == "store_busy" and response["Retry-After"]
    assert took < 6, took
