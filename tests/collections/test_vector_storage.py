"""Stored vectors: float16, one per model window, and the migration that converts float32 stores."""

import numpy as np
import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from collections_app.index import vector_codec

BEFORE = [("collections_app", "0007_built_index_id")]
AFTER = [("collections_app", "0008_float16_vectors")]


def test_a_blob_holds_whole_windows_of_the_given_width():
    windows = np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)
    windows /= np.linalg.norm(windows, axis=1, keepdims=True)
    blob = vector_codec.encode(windows)
    assert len(blob) == 3 * 8 * 2
    assert vector_codec.window_count(blob, 8) == 3
    decoded = vector_codec.decode(blob, 8)
    assert decoded.dtype == np.float32 and np.allclose(decoded, windows, atol=1e-3)
    assert np.array_equal(vector_codec.first_window(blob, 8), decoded[0])
    for width in (5, 0):
        with pytest.raises(vector_codec.VectorFormatError):
            vector_codec.decode(blob, width)
    with pytest.raises(vector_codec.VectorFormatError):
        vector_codec.decode(b"", 8)


@pytest.mark.django_db(transaction=True)
def test_the_migration_turns_float32_vectors_into_float16_and_back():
    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    old_apps = executor.loader.project_state(BEFORE).apps
    Agent = old_apps.get_model("collections_app", "Agent")
    Collection = old_apps.get_model("collections_app", "Collection")
    Document = old_apps.get_model("collections_app", "Document")
    Paragraph = old_apps.get_model("collections_app", "Paragraph")
    agent = Agent.objects.create(agent_id="old")
    collection = Collection.objects.create(agent=agent, name="old")
    document = Document.objects.create(collection=collection, name="a.md")
    vector = np.asarray([0.6, 0.8, 0.0, 0.0], dtype="<f4")
    common = dict(
        agent_id="old",
        collection=collection,
        document=document,
        text="x",
        start_char=0,
        end_char=1,
        fingerprint="f",
    )
    with_vector = Paragraph.objects.create(ordinal=0, index=0, embedding=vector.tobytes(), **common)
    without = Paragraph.objects.create(ordinal=1, index=1, embedding=None, **common)

    executor = MigrationExecutor(connection)
    executor.migrate(AFTER)
    new_apps = executor.loader.project_state(AFTER).apps
    Paragraph = new_apps.get_model("collections_app", "Paragraph")
    stored = bytes(Paragraph.objects.get(pk=with_vector.pk).embedding)
    assert np.array_equal(vector_codec.decode(stored, 4)[0], vector.astype(np.float16).astype(np.float32))
    assert Paragraph.objects.get(pk=without.pk).embedding is None

    executor = MigrationExecutor(connection)
    executor.migrate(BEFORE)
    Paragraph = executor.loader.project_state(BEFORE).apps.get_model("collections_app", "Paragraph")
    back = np.frombuffer(bytes(Paragraph.objects.get(pk=with_vector.pk).embedding), dtype="<f4")
    assert np.allclose(back, vector, atol=1e-3)
    MigrationExecutor(connection).migrate(executor.loader.graph.leaf_nodes())
