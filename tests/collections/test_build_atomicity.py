"""Readers never see a collection half-built or empty while rebuilds replace it."""

import threading

import pytest
from django.db import connection, connections

from collections_app.models import Paragraph
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection

WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven"]


def version_files(version: str) -> dict[str, str]:
    # Numbers spelt out: paragraphs that differ only in their digits are a conflict, held for review.
    return {
        f"doc{i}.md": "\n\n".join(
            f"{version} paragraph {WORDS[j]} of document {WORDS[i]} " + "filler " * 30 for j in range(6)
        )
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


@pytest.mark.django_db
def test_a_full_disk_while_the_index_is_written_fails_the_build_and_the_old_build_answers(
    agent, knowledge_folder, monkeypatch, settings, tmp_path
):
    """Issue 24, item 9: the index is written and read back before the swap commits."""
    import errno

    from collections_app.index.writer import IndexWriter
    from collections_app.models import BuildRun, CollectionBuilt
    from collections_app.services import indexes
    from collections_app.services.search import search_collection

    settings.INDEX_DIR = str(tmp_path / "indexes")
    collection = create_collection(agent=agent, name="disk", method="fixed")
    folder = knowledge_folder("disk", {"a.md": "# Leave\n\nCarry-over is capped at five days a year.\n"})
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    first = CollectionBuilt.objects.get(collection=collection).built_at
    (folder / "a.md").write_text("# Leave\n\nCarry-over is capped at ten days a year.\n")

    def disk_full(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "indexes"))

    with monkeypatch.context() as patched:
        patched.setattr(IndexWriter, "write", disk_full)
        indexes.forget(collection.pk)
        run = build_collection(collection=collection)
        assert run.status == BuildRun.FAILED
        assert "No space left on device" in run.error and "previous one keeps answering" in run.error
        assert str(tmp_path) not in run.error
        assert CollectionBuilt.objects.get(collection=collection).built_at == first
        # The old build answers, from its own index, which was left in place.
        found = search_collection(agent=agent, collection="disk", question="carry-over days", min_score=0)
        assert "five days" in found["paragraphs"][0]["text"]

    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    found = search_collection(agent=agent, collection="disk", question="carry-over days", min_score=0)
    assert "ten days" in found["paragraphs"][0]["text"]
    assert [p.name for p in (tmp_path / "indexes" / f"c{collection.pk}").iterdir() if p.is_dir()] == [
        indexes.build_key(CollectionBuilt.objects.get(collection=collection))
    ]


@pytest.mark.django_db
def test_an_index_that_reads_back_short_of_the_builds_rows_fails_the_build(
    agent, knowledge_folder, monkeypatch
):
    """Issue 24, item 9: an index written without error but holding fewer rows than the build (a row lost
    between the read and the write) is not swapped in. Two guards catch it: the writer's own check that
    what it wrote is what the rows hold (`write_index`), and the read-back before the swap commits."""
    from collections_app.index.writer import IndexWriter
    from collections_app.models import BuildRun, CollectionBuilt
    from collections_app.services.search import search_collection

    collection = create_collection(agent=agent, name="short", method="fixed", size=60)
    text = "# Leave\n\nCarry-over is capped at five days a year.\n\nUnused days lapse in April each year.\n"
    folder = knowledge_folder("short", {"a.md": text})
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    first = CollectionBuilt.objects.get(collection=collection).built_at
    (folder / "a.md").write_text(text.replace("five", "ten"))
    add_postings = IndexWriter.add_postings

    def add_all_but_the_last(self, ids, documents, postings, vectors):
        kept = postings.doc < len(ids) - 1
        fewer = postings._replace(
            term=postings.term[kept],
            doc=postings.doc[kept],
            tf=postings.tf[kept],
            lengths=postings.lengths[:-1],
        )
        add_postings(self, ids[:-1], documents[:-1], fewer, vectors[:-1])

    with monkeypatch.context() as patched:
        patched.setattr(IndexWriter, "add_postings", add_all_but_the_last)
        run = build_collection(collection=collection)
    assert run.status == BuildRun.FAILED, run.error
    assert CollectionBuilt.objects.get(collection=collection).built_at == first
    found = search_collection(agent=agent, collection="short", question="carry-over days", min_score=0)
    assert "five days" in found["paragraphs"][0]["text"]
