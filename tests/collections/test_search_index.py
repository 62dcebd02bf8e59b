"""The per-build search index in use: written when a build or import commits, mapped by searches,
fetched from the store when missing or broken; per-reader statistics and positions; long paragraphs
as several windows."""

import threading

import numpy as np
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from collections_app.index.vector_codec import decode
from collections_app.models import CollectionBuilt, Label, Paragraph
from collections_app.services import indexes
from collections_app.services.agents import create_collection, create_reader
from collections_app.services.builds import build_collection
from collections_app.services.search import forget_index, search_collection
from collections_app.text.windows import LATER_WINDOW_SHARE, model_windows
from ragsite.errors import RagsiteError
from tests.conftest import HANDBOOK

pytestmark = pytest.mark.django_db

QUESTION = "how many days of annual leave carry over"


def index_dir(collection):
    built = CollectionBuilt.objects.get(collection=collection)
    return indexes.collection_root(collection.pk) / indexes.build_key(built)


def ask(agent, collection, **kwargs):
    return search_collection(
        agent=agent, collection=collection, question=kwargs.pop("question", QUESTION), **kwargs
    )


def test_a_build_writes_its_index_and_a_new_build_replaces_it(agent, handbook, settings):
    first = index_dir(handbook)
    assert (first / "meta.json").exists() and (first / "vectors.f32").exists()
    assert first.is_relative_to(settings.INDEX_DIR)
    assert build_collection(collection=handbook).status == "succeeded"
    second = index_dir(handbook)
    assert second != first and (second / "meta.json").exists() and not first.exists()
    assert "capped at five days" in ask(agent, handbook)["paragraphs"][0]["text"]


def test_texts_are_read_from_the_store_only_for_the_hits_and_their_neighbours(agent, handbook):
    ask(agent, handbook)  # map the index
    with CaptureQueriesContext(connection) as queries:
        answer = ask(agent, handbook, most=1, around=1)
    text_reads = [q["sql"] for q in queries.captured_queries if '"agents_chunks"."text"' in q["sql"]]
    assert len(text_reads) == 1 and '"agents_chunks"."id" IN' in text_reads[0]
    assert answer["paragraphs"][0]["passages"] <= 3


@pytest.mark.django_db(transaction=True)
def test_an_index_deleted_mid_flight_is_rebuilt_from_the_rows_while_searches_go_on(agent, handbook):
    expected = ask(agent, handbook)
    answers, errors = [], []

    def searcher():
        from django.db import connections

        try:
            for _ in range(15):
                answers.append(ask(agent, handbook))
        except Exception as exc:  # noqa: BLE001 - the test reports whatever went wrong
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=searcher) for _ in range(3)]
    for thread in threads:
        thread.start()
    for _ in range(10):
        # What a new worker process meets: no mapping of its own, and no files. They are removed as every
        # process removes an index's files, under the folder lock (a removal between another search's
        # write and its mapping failed that search: CI, 2026-12-05).
        forget_index(handbook.pk)
        indexes.discard_copy(collection_id=handbook.pk, key=index_dir(handbook).name)
        answers.append(ask(agent, handbook))
    for thread in threads:
        thread.join()
    assert not errors
    assert len(answers) == 55 and all(answer == expected for answer in answers)
    # A deletion racing a rewrite can leave no files while every process still answers from its
    # mapping; the next process to look writes them again.
    forget_index(handbook.pk)
    assert ask(agent, handbook) == expected
    assert (index_dir(handbook) / "meta.json").exists()


def test_a_corrupt_index_is_fetched_again_from_the_store(agent, handbook, caplog):
    expected = ask(agent, handbook)
    forget_index(handbook.pk)
    (index_dir(handbook) / "postings_gaps.u8").write_bytes(b"broken")
    assert ask(agent, handbook) == expected
    assert "unusable" in caplog.text and "fetched from the store" in caplog.text
    assert (index_dir(handbook) / "postings_gaps.u8").stat().st_size > 6


SECRET = {
    "a-secret.md": "# Secret\n\nAnnual leave annual leave carry over days days days.\n\nLeave over leave.\n",
}


def readable_collection(agent, knowledge_folder, name, files):
    collection = create_collection(agent=agent, name=name, method="fixed", size=80, per_reader=True)
    knowledge_folder(name, files)
    assert build_collection(collection=collection).status == "succeeded"
    secret = Label.objects.get_or_create(name="secret")[0]
    for paragraph in Paragraph.objects.filter(collection=collection, document__name__startswith="a-secret"):
        paragraph.labels.add(secret)
    return collection


def test_a_readers_scores_and_positions_do_not_depend_on_paragraphs_it_cannot_read(agent, knowledge_folder):
    """Issue 15: hidden paragraphs holding the question's words change neither the scores (document
    frequencies and lengths are those of the reader's view) nor the positions a reader is shown."""
    create_reader(external_id="bob", labels=["staff"])
    without = readable_collection(agent, knowledge_folder, "without", HANDBOOK)
    with_hidden = readable_collection(agent, knowledge_folder, "withhidden", {**HANDBOOK, **SECRET})
    assert Paragraph.objects.filter(collection=with_hidden, labels__name="secret").count() >= 2
    for mode in ("lexical", "hybrid", "vector"):
        for question in (QUESTION, "leave over days", "encryption"):
            plain = ask(
                agent, without, reader="bob", mode=mode, question=question, most=20, min_score=0, around=1
            )
            hidden = ask(
                agent, with_hidden, reader="bob", mode=mode, question=question, most=20, min_score=0, around=1
            )
            assert hidden == plain
    # A reader who holds the label sees the secret paragraphs, ranked with statistics that include them.
    create_reader(external_id="carol", labels=["secret"])
    for_carol = ask(agent, with_hidden, reader="carol", mode="lexical", most=3)
    assert for_carol["paragraphs"][0]["document"] == "a-secret.md"


def test_positions_count_only_the_paragraphs_this_search_may_use(agent, knowledge_folder):
    create_reader(external_id="bob", labels=["staff"])
    collection = readable_collection(agent, knowledge_folder, "numbered", {**HANDBOOK, **SECRET})
    readable = Paragraph.objects.filter(collection=collection).exclude(labels__name="secret").count()
    answer = ask(agent, collection, reader="bob", most=50, min_score=0, around=0)
    positions = sorted(p["first"] for p in answer["paragraphs"])
    assert positions == list(range(1, readable + 1))
    assert all(p["first"] == p["last"] for p in answer["paragraphs"])


def test_a_paragraph_longer_than_the_window_is_embedded_as_windows_and_its_tail_scores(
    agent, knowledge_folder, settings
):
    """Issue 12: the tail of a long paragraph is seen by the vector, by its share of what it adds."""
    from ragsite import embedding

    filler = " ".join(f"word{i}" for i in range(600))
    long_text = f"{filler} zebra quokka narwhal axolotl pangolin."
    collection = create_collection(agent=agent, name="long", method="fixed", size=100_000)
    knowledge_folder("long", {"long.md": long_text, "short.md": "Quokka facts are short."})
    assert build_collection(collection=collection).status == "succeeded"
    embedder = embedding.get_embedder()
    paragraph = Paragraph.objects.get(collection=collection, document__name="long.md")
    windows = paragraph.vectors(embedder.dimensions)
    pieces = model_windows(paragraph.text, embedder)
    assert windows.shape[0] == len(pieces) >= 3
    assert all(embedder.count_tokens(piece) <= embedder.window for piece in pieces)
    assert pieces[-1].endswith("pangolin.") and pieces[0].startswith("word0 ")
    # Consecutive windows overlap, so no sentence is lost at a cut.
    assert all(a.split()[-1] in b.split() for a, b in zip(pieces, pieces[1:], strict=False))
    answer = ask(
        agent,
        collection,
        question="zebra quokka narwhal axolotl pangolin",
        mode="vector",
        around=0,
        min_score=0,
    )
    question = embedder.embed(["zebra quokka narwhal axolotl pangolin"])[0]
    best, first = float(np.max(windows @ question)), float(windows[0] @ question)
    assert answer["paragraphs"][0]["document"] == "long.md"
    # The first window's cosine plus the share of what the best (last) window adds (windows.lean_to_first).
    assert answer["paragraphs"][0]["score"] == pytest.approx(
        first + LATER_WINDOW_SHARE * (best - first), abs=1e-6
    )
    assert best > first + 0.1  # the first window alone would not have seen it


def test_stored_vectors_are_float16_one_window_a_short_paragraph(agent, handbook):
    paragraph = Paragraph.objects.filter(collection=handbook).first()
    assert len(bytes(paragraph.embedding)) == 64 * 2
    assert decode(paragraph.embedding, 64).shape == (1, 64)


def test_an_index_folder_that_cannot_be_written_is_a_503_that_names_no_path(
    agent, handbook, settings, tmp_path
):
    forget_index(handbook.pk)
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("a file where the index folder should be")
    settings.INDEX_DIR = blocked
    with pytest.raises(RagsiteError) as caught:
        ask(agent, handbook)
    assert caught.value.status == 503 and caught.value.code == "index_unavailable"
    assert str(tmp_path) not in caught.value.message
    settings.INDEX_DIR = tmp_path / "indexes-again"
    assert "capped at five days" in ask(agent, handbook)["paragraphs"][0]["text"]


def test_a_search_reads_only_the_held_back_rows_of_a_collection_never_all_of_them(agent, handbook):
    """Which documents and paragraphs are held back is asked on every search, in the statement that reads
    the build record; the planner must reach them through the partial indexes of held-back rows, not walk
    every row of the collection (the default ordering made SQLite walk 100,000 paragraphs for it: 170-590 ms
    a search)."""
    if connection.vendor != "sqlite":
        pytest.skip("reads SQLite's query plans")
    ask(agent, handbook)
    with CaptureQueriesContext(connection) as queries:
        ask(agent, handbook, mode="lexical")
    listings = [
        q["sql"]
        for q in queries.captured_queries
        if ("agents_chunks" in q["sql"] or "collections_app_document" in q["sql"]) and " IN (" not in q["sql"]
    ]
    assert len(listings) == 1 and "collection_built" in listings[0]  # one statement: build and held-back rows
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + listings[0])
        steps = [row[-1] for row in cursor.fetchall() if row[-1].startswith(("SEARCH", "SCAN"))]
    assert any("USING INDEX document_held_back" in s for s in steps), steps
    assert any("USING INDEX paragraph_disabled" in s for s in steps), steps
    assert all(
        any(name in s for name in ("document_held_back", "paragraph_disabled", "collection_built"))
        for s in steps
    ), steps
    assert not any(s.startswith("SCAN") for s in steps), steps


def test_a_lexical_search_that_leaves_the_common_words_out_answers_as_scoring_every_row(
    agent, knowledge_folder, monkeypatch
):
    """bm25_top (the common terms read only for rows that can reach the top) against the dense sum over
    every row: the same answer, scores and order, contexts and held-back documents included."""
    from collections_app.index import bm25_top
    from collections_app.models import Document
    from collections_app.services.documents import set_documents_enabled
    from collections_app.services.review import approve_documents

    files = {
        f"policy-{d:02d}.md": f"# Policy {d}\n\n## Part {d % 3}\n\n"
        + "\n\n".join(
            f"The rule of the office in case {d * 10 + p} is rule{(d * 10 + p) % 23} and "
            f"term{(d * 10 + p) % 41}."
            for p in range(10)
        )
        + "\n"
        for d in range(40)
    }
    collection = create_collection(agent=agent, name="policies", method="fixed", size=80)
    knowledge_folder("policies", files)
    # So alike, their paragraphs await review: the first build goes live with them held, a person approves
    # them, and the next goes live whole.
    assert build_collection(collection=collection).status == "succeeded_with_review"
    approve_documents(Document.objects.filter(collection=collection))
    assert build_collection(collection=collection).status == "succeeded"
    monkeypatch.setattr(bm25_top, "LEAST_ROWS", 0)
    pruned = []
    original = bm25_top.bm25_top
    monkeypatch.setattr(bm25_top, "bm25_top", lambda *a, **k: pruned.append(original(*a, **k)) or pruned[-1])
    questions = [
        "the rule of rule5 in case term7",
        "rule12 of the office part 2",
        "the of in",
        "rule3 rule3 term3",
    ]

    def answers():
        return [
            ask(agent, collection, mode="lexical", question=q, most=most, around=around, min_score=floor)
            for q in questions
            for most in (1, 5)
            for around in (0, 1)
            for floor in (0, 0.2)
        ]

    for held_back in (False, True):
        if held_back:
            set_documents_enabled(
                documents=Document.objects.filter(collection=collection, name="policy-01.md"), enabled=False
            )
        pruned.clear()
        quick = answers()
        assert any(found is not None for found in pruned)  # the pruned path was taken
        assert sum(len(answer["paragraphs"]) for answer in quick) > len(quick)
        monkeypatch.setattr(bm25_top, "LEAST_ROWS", 10**9)
        assert answers() == quick
        monkeypatch.setattr(bm25_top, "LEAST_ROWS", 0)


def test_the_build_record_is_read_every_search_and_made_again_only_when_its_row_changed(agent, handbook):
    from collections_app.services.search.rows import current_build

    first = current_build(handbook)
    assert current_build(handbook) is first  # the same row: the record already made
    CollectionBuilt.objects.filter(collection=handbook).update(passages=first.passages - 1)
    changed = current_build(handbook)
    assert changed is not first and changed.passages == first.passages - 1
    CollectionBuilt.objects.filter(collection=handbook).delete()
    assert current_build(handbook) is None


def test_sqlite_marks_every_commit_of_another_connection_and_every_change_of_its_own(tmp_path):
    # What the state statement's shortcut (rows._change_marks) relies on, on a SQLite file in WAL mode.
    import sqlite3

    path = tmp_path / "marks.sqlite3"
    reader, writer = sqlite3.connect(path, isolation_level=None), sqlite3.connect(path, isolation_level=None)
    reader.execute("PRAGMA journal_mode=WAL")
    reader.execute("CREATE TABLE p (id INTEGER PRIMARY KEY, enabled INTEGER)")
    reader.execute("INSERT INTO p VALUES (1, 1)")

    def marks():
        return reader.execute("PRAGMA data_version").fetchone()[0], reader.total_changes

    before = marks()
    reader.execute("SELECT * FROM p").fetchall()
    assert marks() == before  # reading moves nothing
    writer.execute("UPDATE p SET enabled = 0 WHERE id = 1")  # another connection commits
    after_other = marks()
    assert after_other != before
    reader.execute("UPDATE p SET enabled = 1 WHERE id = 1")  # this connection writes
    assert marks() != after_other
    reader.close()
    writer.close()


@pytest.mark.django_db(transaction=True)
def test_a_paragraph_switched_off_after_the_state_was_last_read_is_not_served(agent, handbook, monkeypatch):
    # The state statement is skipped while the marks say nothing was written (a SQLite file; the test
    # database lives in memory, where the shortcut is not taken, so it is told otherwise here).
    from collections_app.services.documents import set_paragraphs_enabled
    from collections_app.services.search import rows

    if connection.vendor != "sqlite":
        pytest.skip("the marks are SQLite's")
    monkeypatch.setattr(connection, "is_in_memory_db", lambda: False)
    statements = []
    fetch_all = rows.fetch_all
    monkeypatch.setattr(rows, "fetch_all", lambda sql, args: statements.append(sql) or fetch_all(sql, args))
    first = ask(agent, handbook, around=0, most=3, min_score=0.0)
    assert statements.count(rows._state_sql) == 1 and len(first["paragraphs"]) == 3
    assert ask(agent, handbook, around=0, most=3, min_score=0.0) == first
    assert statements.count(rows._state_sql) == 1  # nothing written: the state read before stands
    served = Paragraph.objects.get(collection=handbook, text=first["paragraphs"][0]["text"])
    assert set_paragraphs_enabled(paragraphs=[served], enabled=False) == 1
    again = ask(agent, handbook, around=0, most=3, min_score=0.0)
    assert statements.count(rows._state_sql) == 2
    texts = [paragraph["text"] for paragraph in again["paragraphs"]]
    assert served.text not in texts and texts[:2] == [p["text"] for p in first["paragraphs"][1:]]
