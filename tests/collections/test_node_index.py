"""Issue 29, item 3: a build's index travels with the build. Its files are stored in the database beside
the build record; a node without them (or with a broken copy) fetches and verifies them instead of
writing them from the rows; a large collection's searches never wait for that longer than
INDEX_LOAD_WAIT (503 `index_loading` with Retry-After); `warm_indexes` readies a node before traffic."""

import hashlib
import shutil
import threading

import pytest
from django.core.management import call_command
from django.db import connection, connections

from collections_app.models import BuildRun, CollectionBuilt, IndexChunk, IndexFile
from collections_app.services import indexes
from collections_app.services.agents import create_agent, create_collection, issue_key
from collections_app.services.builds import build_collection
from collections_app.services.indexes import loading as index_loading
from collections_app.services.indexes import store as index_store
from collections_app.services.search import forget_index
from ragsite.errors import RagsiteError
from tests.collections.test_search import post
from tests.collections.test_search_index import QUESTION, ask, index_dir
from tests.conftest import HANDBOOK

pytestmark = pytest.mark.django_db


def as_a_new_node(collection):
    """What a fresh container meets: no mapping in this process and no files in INDEX_DIR."""
    forget_index(collection.pk)
    shutil.rmtree(indexes.collection_root(collection.pk), ignore_errors=True)


def test_a_build_stores_its_index_beside_it_and_only_the_live_builds_is_kept(
    agent, handbook, knowledge_folder
):
    folder = index_dir(handbook)
    key = indexes.build_key(CollectionBuilt.objects.get(collection=handbook))
    stored = {f.path: f for f in IndexFile.objects.filter(collection=handbook)}
    on_disk = {p.relative_to(folder).as_posix(): p for p in folder.rglob("*") if p.is_file()}
    assert set(stored) == set(on_disk) and "meta.json" in stored and "vectors.f32" in stored
    for path, record in stored.items():
        assert record.key == key and record.agent_id == "alpha"
        assert record.size == on_disk[path].stat().st_size
        assert record.sha256 == hashlib.sha256(on_disk[path].read_bytes()).hexdigest()
    assert index_store.verify_folder(collection_id=handbook.pk, key=key, folder=folder) is True
    knowledge_folder("handbook", {**HANDBOOK, "extra.md": "# Extra\n\nBicycles may be parked in the yard.\n"})
    assert build_collection(collection=handbook).status == BuildRun.SUCCEEDED
    newer = indexes.build_key(CollectionBuilt.objects.get(collection=handbook))
    assert newer != key
    assert set(IndexFile.objects.filter(collection=handbook).values_list("key", flat=True)) == {newer}
    assert not IndexChunk.objects.exclude(file__key=newer).exists()


def test_a_node_without_the_files_fetches_them_and_never_writes_them_from_the_rows(
    agent, handbook, monkeypatch, caplog
):
    expected = ask(agent, handbook)
    as_a_new_node(handbook)
    monkeypatch.setattr(indexes, "_write_rows", lambda *a: pytest.fail("written from the rows"))
    assert ask(agent, handbook) == expected
    assert "fetched from the store" in caplog.text
    key = indexes.build_key(CollectionBuilt.objects.get(collection=handbook))
    assert index_store.verify_folder(collection_id=handbook.pk, key=key, folder=index_dir(handbook)) is True


def test_a_request_in_its_agents_scope_fetches_its_collections_index(agent, handbook, client):
    """Over the API a search runs in its agent's row-level-security scope (PostgreSQL): the index rows it
    fetches carry that agent's id, so it reads them."""
    raw = issue_key(agent=agent)[1]
    url, body = "/api/v1/collections/handbook/search", {"question": QUESTION, "around": 0}
    expected = post(client, raw, url, body).json()
    as_a_new_node(handbook)
    response = post(client, raw, url, body)
    assert response.status_code == 200 and response.json() == expected
    assert (index_dir(handbook) / "meta.json").exists()


def test_a_stored_copy_that_fails_its_checksum_is_never_used(agent, handbook, caplog):
    """A chunk changed in the store (same length): the fetch refuses it and the node writes the index from
    the rows instead, which answers the same."""
    expected = ask(agent, handbook)
    chunk = IndexChunk.objects.get(file__collection=handbook, file__path="vectors.f32", number=0)
    data = bytearray(bytes(chunk.data))
    data[0] ^= 0xFF
    chunk.data = bytes(data)
    chunk.save()
    as_a_new_node(handbook)
    assert ask(agent, handbook) == expected
    assert "does not match its size and SHA-256" in caplog.text and "writing it from the rows" in caplog.text
    assert not any(p.name.endswith(".fetch") for p in indexes.collection_root(handbook.pk).iterdir())


def test_the_build_fails_and_the_old_build_answers_when_the_store_refuses_its_index(
    agent, handbook, knowledge_folder
):
    expected = ask(agent, handbook)
    before = CollectionBuilt.objects.get(collection=handbook).built_at
    old_key = indexes.build_key(CollectionBuilt.objects.get(collection=handbook))
    knowledge_folder("handbook", {**HANDBOOK, "extra.md": "# Extra\n\nBicycles may be parked in the yard.\n"})
    with refused_chunks():
        run = build_collection(collection=handbook)
    assert run.status == BuildRun.FAILED
    assert "could not be written" in run.error and "the store refused its files" in run.error
    assert "previous one keeps answering" in run.error
    assert CollectionBuilt.objects.get(collection=handbook).built_at == before
    assert set(IndexFile.objects.filter(collection=handbook).values_list("key", flat=True)) == {old_key}
    forget_index(handbook.pk)
    assert ask(agent, handbook) == expected
    as_a_new_node(handbook)  # and a new node fetches the old build's files, still whole
    assert ask(agent, handbook) == expected


class refused_chunks:
    """A store that refuses every chunk (a trigger: the database itself says no)."""

    def __enter__(self):
        with connection.cursor() as cursor:
            if connection.vendor == "sqlite":
                cursor.execute(
                    "CREATE TRIGGER refuse_chunks BEFORE INSERT ON collection_index_chunk "
                    "BEGIN SELECT RAISE(ABORT, 'the store is full'); END"
                )
            else:
                cursor.execute(
                    "CREATE FUNCTION refuse_chunks() RETURNS trigger AS $$ BEGIN "
                    "RAISE EXCEPTION 'the store is full'; END $$ LANGUAGE plpgsql"
                )
                cursor.execute(
                    "CREATE TRIGGER refuse_chunks BEFORE INSERT ON collection_index_chunk "
                    "FOR EACH ROW EXECUTE FUNCTION refuse_chunks()"
                )

    def __exit__(self, *exc):
        with connection.cursor() as cursor:
            cursor.execute(
                "DROP TRIGGER refuse_chunks"
                if connection.vendor == "sqlite"
                else "DROP TRIGGER refuse_chunks ON collection_index_chunk; DROP FUNCTION refuse_chunks()"
            )


@pytest.mark.django_db(transaction=True)
def test_a_node_that_lost_its_index_answers_within_its_bound_while_other_searches_run(
    agent, knowledge_folder, monkeypatch, settings, client
):
    """The done-when test: the index files of a large collection are deleted on this node and its fetch is
    held up. The first search of it answers 503 `index_loading` with Retry-After at once (it does not wait
    for the fetch), searches of another collection answer meanwhile, only one fetch runs, and once it
    ends the collection answers as before."""
    big = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK)
    other = create_collection(agent=agent, name="other", method="fixed", size=80)
    knowledge_folder("other", HANDBOOK)
    for collection in (big, other):
        assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    expected, other_expected = ask(agent, big), ask(agent, other)
    settings.INDEX_LOAD_INLINE_ROWS = 0  # every collection counts as large here: loaded off the request
    settings.INDEX_LOAD_WAIT = 0.05
    fetching, release, fetches = threading.Event(), threading.Event(), []
    real_fetch = index_store.fetch_files

    def held_fetch(**kwargs):
        fetches.append(kwargs["collection_id"])
        fetching.set()
        assert release.wait(60), "the test never released the fetch"
        return real_fetch(**kwargs)

    monkeypatch.setattr(index_store, "fetch_files", held_fetch)
    as_a_new_node(big)
    try:
        while_the_fetch_is_held(agent, big, other, other_expected, fetching, release, fetches, client)
    finally:
        release.set()  # never leave the loader (and its connection) waiting
    settings.INDEX_LOAD_WAIT = 60  # the search now waits for the fetch it joined
    assert ask(agent, big) == expected
    assert fetches == [big.pk] and not index_loading.loading(big.pk)


def while_the_fetch_is_held(agent, big, other, other_expected, fetching, release, fetches, client):
    """While the fetch is held: the first search answers 503 at once, another collection answers, the API
    says the same in the one error shape, and no second fetch starts."""
    with pytest.raises(RagsiteError) as first:
        ask(agent, big)
    assert first.value.status == 503 and first.value.code == "index_loading"
    assert first.value.headers["Retry-After"] == str(index_loading.RETRY_SECONDS)
    assert fetching.wait(60) and not release.is_set()  # the fetch started, and is still held
    assert index_loading.loading(big.pk)

    answers, failures = [], []

    def search_the_other():
        try:
            for _ in range(3):
                answers.append(ask(agent, other))
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            connections.close_all()

    runner = threading.Thread(target=search_the_other)
    runner.start()
    runner.join(60)
    assert not failures and answers == [other_expected] * 3  # the other collection never waited
    raw = issue_key(agent=agent)[1]
    response = post(client, raw, "/api/v1/collections/handbook/search", {"question": QUESTION})
    assert response.status_code == 503 and response["Retry-After"] == str(index_loading.RETRY_SECONDS)
    assert response.json()["error"]["code"] == "index_loading"  # the one error shape
    assert fetches == [big.pk]  # one fetch, however many searches asked


def test_warm_indexes_readies_every_live_index_of_every_agent(agent, handbook, knowledge_folder, capsys):
    """Fetched when missing, fetched again when a copy differs from the stored one by a byte (same size:
    only the checksum sees it), written from the rows and then stored when nothing was stored."""
    beta, _raw = create_agent(agent_id="beta", name="Beta")
    theirs = create_collection(agent=beta, name="theirs", method="fixed", size=80)
    knowledge_folder("theirs", HANDBOOK, agent="beta")
    assert build_collection(collection=theirs).status == BuildRun.SUCCEEDED
    legacy = create_collection(agent=agent, name="legacy", method="fixed", size=80)
    knowledge_folder("legacy", HANDBOOK)
    assert build_collection(collection=legacy).status == BuildRun.SUCCEEDED
    IndexFile.objects.filter(collection=legacy).delete()  # as a build made before files were stored
    as_a_new_node(legacy)
    as_a_new_node(theirs)
    vectors = index_dir(handbook) / "vectors.f32"
    flipped = bytearray(vectors.read_bytes())
    flipped[-1] ^= 0x01
    vectors.write_bytes(bytes(flipped))
    call_command("warm_indexes")
    shown = capsys.readouterr().out
    assert "alpha/handbook: fetched" in shown and "beta/theirs: fetched" in shown
    assert "alpha/legacy: written" in shown
    for collection in (handbook, theirs, legacy):
        key = indexes.build_key(CollectionBuilt.objects.get(collection=collection))
        assert index_store.verify_folder(collection_id=collection.pk, key=key, folder=index_dir(collection))
    call_command("warm_indexes")
    assert capsys.readouterr().out.count(": ready in") == 3
    IndexFile.objects.filter(collection=legacy).delete()  # the copy here is the only one: stored
    call_command("warm_indexes", "--no-verify")
    assert "alpha/legacy: stored" in capsys.readouterr().out
    assert index_store.is_stored(
        collection_id=legacy.pk, key=indexes.build_key(CollectionBuilt.objects.get(collection=legacy))
    )


def test_an_import_stores_its_index_and_a_new_node_fetches_it(agent, handbook, tmp_path, monkeypatch):
    """An import writes its index after it commits, as it did, and now stores it too (the old build's
    files go): a node without the files fetches them rather than writing them from the rows."""
    from collections_app.services.interchange import export_index, import_index

    export_index(collection=handbook, directory=tmp_path)
    beta = create_agent(agent_id="beta", name="Beta")[0]
    copy = import_index(agent=beta, directory=tmp_path, index_id="handbook", name="copy")
    key = indexes.build_key(CollectionBuilt.objects.get(collection=copy))
    assert set(IndexFile.objects.filter(collection=copy).values_list("key", "agent_id")) == {(key, "beta")}
    expected = ask(beta, copy)
    as_a_new_node(copy)
    monkeypatch.setattr(indexes, "_write_rows", lambda *a: pytest.fail("written from the rows"))
    assert ask(beta, copy) == expected


def test_an_index_of_an_older_layout_is_never_mapped_nor_fetched_and_is_replaced(
    agent, handbook, monkeypatch, caplog, capsys
):
    """The layout's format is in the build's key and in meta.json: a node that finds an older layout's
    copy of the same build (stored by an older node, or left on disk) never serves it, nor a mix of it
    and the new one; it writes the index from the rows, and the store then holds the new layout only."""
    import json

    from collections_app.index.format import FORMAT

    expected = ask(agent, handbook)
    key = indexes.build_key(CollectionBuilt.objects.get(collection=handbook))
    older_key = key.removesuffix(f"-f{FORMAT}")  # what the previous layout named the same build
    assert older_key != key
    root = indexes.collection_root(handbook.pk)

    def older_copy(folder):
        shutil.copytree(index_dir(handbook), folder)
        meta = json.loads((folder / "meta.json").read_text())
        (folder / "meta.json").write_text(json.dumps({**meta, "format": FORMAT - 1}))
        return folder

    stored = older_copy(root.parent / f"older-{handbook.pk}")
    index_store.store_files(collection=handbook, key=older_key, folder=stored)  # all an older node left
    as_a_new_node(handbook)
    shutil.copytree(stored, root / older_key)
    shutil.copytree(stored, root / key)
    caplog.clear()
    assert ask(agent, handbook) == expected
    assert f"format {FORMAT - 1} is not {FORMAT}" in caplog.text  # the copy under today's key: refused
    assert "fetched from the store" not in caplog.text  # the stored older layout: another build's files
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [key]
    assert json.loads((index_dir(handbook) / "meta.json").read_text())["format"] == FORMAT
    call_command("warm_indexes", "--no-verify")
    assert "alpha/handbook: stored" in capsys.readouterr().out
    assert set(IndexFile.objects.filter(collection=handbook).values_list("key", flat=True)) == {key}
    as_a_new_node(handbook)
    monkeypatch.setattr(indexes, "_write_rows", lambda *a: pytest.fail("written from the rows"))
    assert ask(agent, handbook) == expected  # the next node fetches the new layout
