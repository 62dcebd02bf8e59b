"""Fixtures the collections tests share."""

import pytest

from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from tests.conftest import HANDBOOK


@pytest.fixture
def handbook(agent, knowledge_folder):
    """The small handbook, built in fixed pieces of 80 characters (a module may define its own)."""
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK)
    assert build_collection(collection=collection).status == "succeeded"
    return collection


@pytest.fixture
def embedding_server(settings):
    """A real OpenAI-compatible embedding endpoint on 127.0.0.1, as EMBED_URL."""
    import threading

    from ragsite import embedding
    from tests.shared.test_embedders_http import FakeEmbeddingServer

    server = FakeEmbeddingServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    settings.EMBED_BACKEND, settings.EMBED_URL, settings.EMBED_MODEL = "http", server.url, "house-model"
    embedding._embedder_for.cache_clear()
    yield server
    server.shutdown()
    server.server_close()
    embedding._embedder_for.cache_clear()
