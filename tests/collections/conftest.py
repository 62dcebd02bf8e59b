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


@pytest.fixture
def check(django_capture_on_commit_callbacks):
    """A sync check as the task runs it: its build is queued on commit and carried out at once (Conf.SYNC)."""
    from collections_app.services import sync_check

    def run(collection) -> sync_check.Check:
        with django_capture_on_commit_callbacks(execute=True):
            found = sync_check.check_source(collection=collection)
        if found.build is not None:
            found.build.refresh_from_db()
        return found

    return run


@pytest.fixture
def fetches_of(monkeypatch):
    """`fetches_of(OriginClass)`: the list of the names that origin downloads from then on (each call
    passes through to its real fetch)."""

    def counting(origin_class) -> list[str]:
        fetched = []
        real = origin_class.fetch

        def fetch(self, entry, limit):
            fetched.append(entry.name)
            return real(self, entry, limit)

        monkeypatch.setattr(origin_class, "fetch", fetch)
        return fetched

    return counting


@pytest.fixture
def remote_handbook(tmp_path, settings):
    """`remote_handbook(kind, files=HANDBOOK)`: the files served by a real server of that kind on
    loopback (sources_servers.serve_handbook), as (settings, credentials); servers stop at the end."""
    from tests.collections.sources_servers import serve_handbook

    settings.SOURCE_ALLOWED_HOSTS = []  # loopback only
    settings.SOURCE_TIMEOUT = 10
    settings.SOURCE_CACHE_DIR = str(tmp_path / "source-cache")
    stop = []
    made = iter(range(100))

    def serve(kind: str, files: dict[str, str] = HANDBOOK) -> tuple[dict, dict]:
        return serve_handbook(kind, tmp_path / f"remote-{next(made)}", files, stop)

    yield serve
    for stopping in reversed(stop):
        stopping()
