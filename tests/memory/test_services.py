"""Storing, changing, deleting and reading records through the services, on the real database."""

import numpy as np
import pytest
from django.db import IntegrityError, connection, transaction

from memory_app import services
from memory_app.models import EPISODE, MAX_TEXT_LENGTH, MEMORY, Episode, Memory, RecordNode
from ragsite.embedders import HashEmbedder, NoneEmbedder
from ragsite.errors import NotFound, RagsiteError

from .conftest import WINDOW, prose

pytestmark = pytest.mark.django_db


def nodes_of(record):
    return services.record_nodes(record.KIND, record.pk)


def test_storing_a_short_memory_answers_without_nodes_and_builds_none(agent, run_on_commit, embedder):
    memory, nodes = run_on_commit(
        services.store_memory, agent=agent, text="The kettle is in the left cupboard."
    )
    assert nodes is None
    assert memory.token_count == 7 + 2 and memory.embedding_model == embedder.model
    assert memory.vector is None  # the store answered before the vector was made ...
    memory.refresh_from_db()  # ... by the task its commit queued
    vector = memory.vector
    assert vector.dtype == np.dtype("<f4") and abs(float(np.linalg.norm(vector)) - 1) < 1e-6
    assert nodes_of(memory) == []


def test_storing_a_long_memory_answers_queued_and_the_task_builds_its_nodes(agent, run_on_commit):
    text = prose(200, seed=1)
    memory, nodes = run_on_commit(services.store_memory, agent=agent, text=text)
    assert nodes == {"status": "queued"}
    built = nodes_of(memory)
    assert len(built) >= 5
    assert all(node.window == WINDOW and node.embedding_model == "hash-256" for node in built)


def test_the_vector_and_node_tasks_are_enqueued_only_when_the_row_commits(
    agent, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks() as callbacks:
        memory, _ = services.store_memory(agent=agent, text=prose(200))
    assert len(callbacks) == 2
    assert (
        nodes_of(memory) == [] and memory.embedding is None
    )  # until the commit, nothing was enqueued or made
    for callback in callbacks:
        callback()
    memory.refresh_from_db()
    assert nodes_of(memory) and memory.vector is not None


def test_archiving_a_long_episode_works_like_storing_a_memory(agent, run_on_commit):
    episode, nodes = run_on_commit(services.archive_episode, agent=agent, text=prose(150, seed=2))
    assert isinstance(episode, Episode) and episode.kind == EPISODE
    assert nodes == {"status": "queued"}
    assert (
        RecordNode.objects.filter(parent_kind="ep", parent_id=episode.pk).count()
        == len(nodes_of(episode))
        > 1
    )
    # A memory with the same id would be another record: nodes are keyed by kind too.
    assert RecordNode.objects.filter(parent_kind="mem").count() == 0


@pytest.mark.parametrize("store", [services.store_memory, services.archive_episode])
def test_text_is_limited_to_16000_characters(agent, store):
    store(agent=agent, text="x" * MAX_TEXT_LENGTH)
    with pytest.raises(RagsiteError) as refused:
        store(agent=agent, text="x" * (MAX_TEXT_LENGTH + 1))
    assert refused.value.code == "text_too_long" and refused.value.status == 400
    assert "16,000" in refused.value.message


@pytest.mark.parametrize("text", ["", "   \n ", None, 42, "nul \x00 inside"])
def test_empty_or_malformed_text_is_refused(agent, text):
    with pytest.raises(RagsiteError) as refused:
        services.store_memory(agent=agent, text=text)
    assert refused.value.status == 400


@pytest.mark.parametrize("model", [Memory, Episode])
def test_the_database_itself_refuses_text_past_the_limit(agent, model):
    with pytest.raises(IntegrityError), transaction.atomic():
        model.objects.create(agent=agent, text="y" * (MAX_TEXT_LENGTH + 1))
    with pytest.raises(IntegrityError), transaction.atomic():
        model.objects.create(agent=agent, text="")


def test_with_no_embedding_model_records_are_stored_but_get_no_embedding_and_no_nodes(
    agent, run_on_commit, monkeypatch
):
    monkeypatch.setattr("ragsite.embedding.get_embedder", lambda backend=None: NoneEmbedder())
    memory, nodes = run_on_commit(services.store_memory, agent=agent, text=prose(400))
    assert nodes is None  # unknown is not "runs past", and nothing is queued
    assert memory.embedding is None and memory.token_count is None and memory.embedding_model == ""
    assert nodes_of(memory) == []
    assert services.build_nodes(MEMORY, memory.pk).status == "unknown"


def test_changing_the_text_re_embeds_and_queues_new_nodes(agent, run_on_commit):
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=prose(200, seed=1))
    memory.refresh_from_db()
    old_vector = memory.vector.copy()
    new_text = prose(260, seed=9)
    changed, nodes = run_on_commit(
        services.update_text, agent=agent, kind=MEMORY, id=memory.pk, text=new_text
    )
    assert nodes == {"status": "queued"}
    assert changed.vector is None  # the change answered before its vector was made ...
    changed.refresh_from_db()  # ... by the task its commit queued
    assert changed.vector is not None and not np.allclose(changed.vector, old_vector)
    rebuilt = nodes_of(memory)
    assert rebuilt[-1].end_char == len(new_text)
    assert (
        services.get_node(agent=agent, kind=MEMORY, id=memory.pk, index=0)["text"]
        == new_text[: rebuilt[0].end_char]
    )


def test_a_change_answers_before_its_vector_and_recall_meanwhile_goes_by_words(
    agent, django_capture_on_commit_callbacks
):
    memory, _ = services.store_memory(agent=agent, text="The spare key is under the blue flowerpot.")
    services.embed_vector(MEMORY, memory.pk)
    with django_capture_on_commit_callbacks() as callbacks:
        services.update_text(
            agent=agent, kind=MEMORY, id=memory.pk, text="The spare key now hangs in the garden shed."
        )
    assert len(callbacks) == 1  # the vector's task, queued when the row commits; nothing embedded yet
    memory.refresh_from_db()
    assert memory.embedding is None and memory.embedding_model
    (hit,) = services.recall(agent=agent, query="garden shed key", most=1)["excerpts"]
    assert hit["id"] == memory.pk and "garden shed" in hit["text"]  # found by its words meanwhile
    waiting = services.check_health(agent=agent)["missing_vectors"]
    assert waiting == 1  # and the health repair would make it should the task never run
    callbacks[0]()
    memory.refresh_from_db()
    assert memory.vector is not None
    assert services.check_health(agent=agent)["missing_vectors"] == 0


def test_changing_a_long_text_to_a_short_one_leaves_no_nodes(agent, run_on_commit):
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=prose(200))
    _, nodes = run_on_commit(services.update_text, agent=agent, kind=MEMORY, id=memory.pk, text="Now short.")
    assert nodes is None and nodes_of(memory) == []


def test_a_locked_record_cannot_be_changed_or_deleted(agent):
    memory, _ = services.store_memory(agent=agent, text="keep this exactly")
    Memory.objects.filter(pk=memory.pk).update(locked=True)
    for attempt in (
        lambda: services.update_text(agent=agent, kind=MEMORY, id=memory.pk, text="changed"),
        lambda: services.delete_record(agent=agent, kind=MEMORY, id=memory.pk),
    ):
        with pytest.raises(RagsiteError) as refused:
            attempt()
        assert refused.value.status == 409 and refused.value.code == "record_locked"
    assert Memory.objects.get(pk=memory.pk).text == "keep this exactly"


def test_deleting_a_record_deletes_its_nodes(agent, run_on_commit):
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=prose(200))
    assert nodes_of(memory)
    services.delete_record(agent=agent, kind=MEMORY, id=memory.pk)
    assert not Memory.objects.filter(pk=memory.pk).exists()
    assert nodes_of(memory) == []


def test_a_node_is_read_through_its_parent(agent, run_on_commit):
    text = prose(200, seed=4)
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=text)
    node = services.get_node(agent=agent, kind=MEMORY, id=memory.pk, index=1)
    assert node["text"] == text[node["start"] : node["end"]]
    assert node["token_count"] <= node["window"] == WINDOW
    with pytest.raises(NotFound) as missing:
        services.get_node(agent=agent, kind=MEMORY, id=memory.pk, index=999)
    assert missing.value.code == "unknown_node"


def test_another_agents_record_answers_exactly_like_a_missing_one(agent, other_agent, run_on_commit):
    theirs, _ = run_on_commit(services.store_memory, agent=other_agent, text=prose(200))
    attempts = {
        "get_node": lambda id: services.get_node(agent=agent, kind=MEMORY, id=id, index=0),
        "update": lambda id: services.update_text(agent=agent, kind=MEMORY, id=id, text="mine now"),
        "delete": lambda id: services.delete_record(agent=agent, kind=MEMORY, id=id),
        "read": lambda id: services.read_record(agent=agent, kind=MEMORY, id=id),
    }
    for name, attempt in attempts.items():
        with pytest.raises(NotFound) as on_theirs:
            attempt(theirs.pk)
        with pytest.raises(NotFound) as on_missing:
            attempt(theirs.pk + 1000)
        assert on_theirs.value.code == on_missing.value.code == "unknown_record", name
    assert services.recall(agent=agent, query="river stone", most=5)["excerpts"] == []
    assert services.list_records(agent=agent, kind=MEMORY)["records"] == []
    assert Memory.objects.get(pk=theirs.pk).text == theirs.text and nodes_of(theirs)


def test_an_unknown_kind_is_bad_input(agent):
    with pytest.raises(RagsiteError) as refused:
        services.get_node(agent=agent, kind="note", id=1, index=0)
    assert refused.value.status == 400 and refused.value.code == "invalid_kind"


def test_a_build_whose_record_changed_meanwhile_writes_nothing(agent, monkeypatch):
    memory, _ = services.store_memory(agent=agent, text=prose(200, seed=5))
    real = HashEmbedder(window=WINDOW)

    class ChangesTheTextWhileEmbedding(HashEmbedder):
        def embed_with_usage(self, texts):
            # Another writer changes the record between the division and the write.
            Memory.objects.filter(pk=memory.pk).update(text=prose(210, seed=6))
            return real.embed_with_usage(texts)

    monkeypatch.setattr(
        "ragsite.embedding.get_embedder", lambda backend=None: ChangesTheTextWhileEmbedding(window=WINDOW)
    )
    assert services.build_nodes(MEMORY, memory.pk).status == "changed"
    assert nodes_of(memory) == []


def test_a_build_for_a_deleted_record_writes_nothing(agent):
    memory, _ = services.store_memory(agent=agent, text=prose(200))
    Memory.objects.filter(pk=memory.pk).delete()
    assert services.build_nodes(MEMORY, memory.pk).status == "gone"
    assert RecordNode.objects.count() == 0


def test_building_twice_does_the_work_once(agent, run_on_commit, monkeypatch):
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=prose(200))
    assert services.build_nodes(MEMORY, memory.pk).status == "present"


def test_ids_are_never_reused_after_the_highest_is_deleted(agent):
    for model in (Memory, Episode):
        first = model.objects.create(agent=agent, text="one")
        highest = model.objects.create(agent=agent, text="two")
        highest_id = highest.pk
        highest.delete()
        again = model.objects.create(agent=agent, text="three")
        assert again.pk > highest_id > first.pk, (model.__name__, connection.vendor)


def test_the_tables_are_declared_to_never_reuse_ids():
    with connection.cursor() as cursor:
        for table in ("memories", "episodes"):
            if connection.vendor == "sqlite":
                cursor.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = %s", [table])
                assert "AUTOINCREMENT" in cursor.fetchone()[0].upper()
            else:
                cursor.execute(
                    "SELECT is_identity FROM information_schema.columns WHERE table_name = %s AND "
                    "column_name = 'id'",
                    [table],
                )
                assert cursor.fetchone()[0] == "YES"


def test_record_nodes_has_the_seed_schema():
    with connection.cursor() as cursor:
        description = connection.introspection.get_table_description(cursor, "record_nodes")
        constraints = connection.introspection.get_constraints(cursor, "record_nodes")
    columns = [column.name for column in description]
    assert columns == [
        "parent_kind",
        "parent_id",
        "node_index",
        "start_char",
        "end_char",
        "token_count",
        "window",
        "embedding",
        "embedding_model",
    ]
    nullable = {column.name for column in description if column.null_ok}
    assert nullable == {"embedding"}
    primary = [c["columns"] for c in constraints.values() if c["primary_key"]]
    assert primary == [["parent_kind", "parent_id", "node_index"]]
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO record_nodes (parent_kind, parent_id, node_index, start_char, end_char, "
            "token_count, window) "
            "VALUES ('mem', 1, 0, 0, 5, 3, 40)".replace("window)", '"window")')
        )
        cursor.execute("SELECT embedding_model, embedding FROM record_nodes")
        assert cursor.fetchone() == ("", None)  # DEFAULT '' and a nullable BLOB


class BrokenEmbedder(HashEmbedder):
    """Counts tokens but cannot embed, like an endpoint that went down between two calls."""

    def embed_with_usage(self, texts):
        from ragsite.embedders import EmbeddingError

        raise EmbeddingError("the embedding endpoint could not be reached")


def test_a_store_whose_embedder_cannot_count_stores_nothing_and_says_so(agent, monkeypatch):
    class CannotCount(BrokenEmbedder):
        def count_tokens(self, text):
            from ragsite.embedders import EmbeddingError

            raise EmbeddingError("the embedding endpoint could not be reached")

    monkeypatch.setattr("ragsite.embedding.get_embedder", lambda backend=None: CannotCount(window=WINDOW))
    with pytest.raises(RagsiteError) as refused:
        services.store_memory(agent=agent, text="remember me")
    assert refused.value.status == 503 and refused.value.code == "embedding_unavailable"
    assert not Memory.objects.exists()


def test_a_vector_that_could_not_be_made_is_made_by_the_repair(agent, run_on_commit, monkeypatch, embedder):
    """The store answers before its vector exists; a failed vector task leaves it to the health repair,
    and meanwhile recall finds the record by its words."""
    monkeypatch.setattr(
        "ragsite.embedding.get_embedder", lambda backend=None: BrokenEmbedder(dimensions=256, window=WINDOW)
    )
    memory, _ = run_on_commit(services.store_memory, agent=agent, text="The kettle is in the left cupboard.")
    memory.refresh_from_db()
    assert memory.embedding is None and memory.embedding_model == "hash-256"
    monkeypatch.setattr("ragsite.embedding.get_embedder", lambda backend=None: embedder)
    assert [e["id"] for e in services.recall(agent=agent, query="kettle cupboard")["excerpts"]] == [memory.pk]
    report = services.check_health(repair=True)
    assert report["missing_vectors"] == 1 and report["vectors"] == [
        {"kind": MEMORY, "id": memory.pk, "status": "built"}
    ]
    memory.refresh_from_db()
    assert memory.vector is not None and services.check_health()["missing_vectors"] == 0


def test_recall_still_answers_lexically_when_the_query_cannot_be_embedded(agent, run_on_commit, monkeypatch):
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=prose(200, seed=1))
    run_on_commit(services.store_memory, agent=agent, text="nothing in common here")
    monkeypatch.setattr(
        "ragsite.embedding.get_embedder", lambda backend=None: BrokenEmbedder(dimensions=256, window=WINDOW)
    )
    excerpt = services.recall(agent=agent, query="river lantern", most=5)["excerpts"][0]
    assert excerpt["id"] == memory.pk
    # Ranked lexically by its nodes, and quoted from them.
    assert (
        isinstance(excerpt["nodes"], dict)
        and excerpt["text"] == memory.text[excerpt["start"] : excerpt["end"]]
    )
    assert "river" in excerpt["text"].lower() or "lantern" in excerpt["text"].lower()


def test_a_failed_node_build_is_left_for_the_repair(agent, monkeypatch):
    memory, _ = services.store_memory(agent=agent, text=prose(200))
    monkeypatch.setattr(
        "ragsite.embedding.get_embedder", lambda backend=None: BrokenEmbedder(dimensions=256, window=WINDOW)
    )
    assert services.build_nodes(MEMORY, memory.pk).status == "failed"
    report = services.check_health(repair=True)
    assert report["repaired"][0]["status"] == "failed" and report["remaining"] == 1
