"""Readers never see a collection half-built or empty while rebuilds replace it."""

import threading

import pytest
from django.db import connection, connections

from collections_app.models import Paragraph
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection


def version_files(version: str) -> dict[str, str]:
    return {
        f"doc{i}.md": "\n\n".join(f"{version} paragraph {j} of document {i} " + "filler " * 30 for j in range(6))
        for i in range(8)
    }


@pytest.mark.django_db(transaction=True)
def test_a_reader_sees_the_old_or_the_new_collection_never_a_mix_or_nothing(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="swap", method="structure", size=600, overlap=0)
    folder = knowledge_folder("swap", version_files("alpha"))
    assert build_collection(collection=collection).status == "succeeded"
    expected = Paragraph.objects.filter(collection=collection).count()

    seen: list[tuple[int, frozenset]] = []
    stop = threading.Event()
    failures: list[BaseException] = []

    def reader():
        try:
            while not stop.is_set():
                # One statement reads one snapshot, on SQLite (WAL) and PostgreSQL alike.
                with connection.cursor() as cursor:
                    cursor.execute(
                        "SELECT COUNT(*), MIN(substr(text, 1, 5)), MAX(substr(text, 1, 5)) "
                        "FROM agents_chunks WHERE collection_id = %s",
                        [collection.pk],
                    )
                    count, low, high = cursor.fetchone()
                seen.append((count, frozenset({low, high})))
        except BaseException as exc:  # reported to the test thread
            failures.append(exc)
        finally:
            connections.close_all()

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for version in ("bravo", "alpha", "bravo", "alpha"):
            for name, text in version_files(version).items():
                (folder / name).write_text(text)
            assert build_collection(collection=collection).status == "succeeded"
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not failures, failures
    assert len(seen) > 5
    assert all(count == expected for count, _ in seen), {c for c, _ in seen}
    assert all(versions in ({"alpha"}, {"bravo"}) for _, versions in seen), {v for _, v in seen}
