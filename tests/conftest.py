"""Fixtures shared by the whole suite."""

import shutil
from pathlib import Path

import pytest

SAMPLE_DOCS = Path(__file__).resolve().parents[1] / "collections_app" / "sample_docs"

# A small handbook whose paragraphs each answer one question, shared by the search, MCP and admin tests.
HANDBOOK = {
    "leave.md": "# Leave\n\nCarry-over of annual leave is capped at five days a year.\n\n"
    "Unused days beyond five lapse on the first of April.\n\n"
    "Requests for leave go to your line manager two weeks ahead.\n",
    "security.md": "# Security\n\nLaptops must use full-disk encryption.\n\n"
    "Badges are worn at all times on site.\n\nLost badges are reported to reception the same day.\n",
    "travel.md": (
        "# Travel\n\nMileage is reimbursed at 0.42 per kilometre.\n\nTrains are booked in standard class.\n"
    ),
}


@pytest.fixture(autouse=True, scope="session")
def _a_private_secret_key():
    """The suite runs with DEBUG off, so it needs a key of its own (ragsite.E001 refuses the public
    one); set in the environment too, for the servers and clusters tests start as subprocesses."""
    import os
    import secrets

    from django.conf import settings
    from django_q.conf import Conf

    key = os.environ.get("SECRET_KEY") or secrets.token_urlsafe(50)
    previous, settings.SECRET_KEY = settings.SECRET_KEY, key
    # django-q2 signs queued tasks with the key it read at import; a cluster subprocess reads this one.
    previous_q, Conf.SECRET_KEY = Conf.SECRET_KEY, key
    os.environ["SECRET_KEY"] = key
    yield
    settings.SECRET_KEY, Conf.SECRET_KEY = previous, previous_q


@pytest.fixture(autouse=True, scope="session")
def _tasks_run_synchronously():
    # Tests run django-q tasks in-process, at the moment they are enqueued;
    # test_qcluster starts a real cluster instead.
    from django_q.conf import Conf

    previous, Conf.SYNC = Conf.SYNC, True
    yield
    Conf.SYNC = previous


@pytest.fixture(autouse=True)
def _no_deployment_folders(monkeypatch, settings, tmp_path):
    """Tests name their own folders; none leaks in from the environment running them.

    KNOWLEDGE_ROOT is an empty temporary folder, so a demo's documents under the
    checkout's data/ never reach a test.
    """
    import os

    for name in list(os.environ):
        if name.startswith("KNOWLEDGE_") and name.endswith("_FOLDER"):
            monkeypatch.delenv(name)
    settings.KNOWLEDGE_ROOT = str(tmp_path / "knowledge-root")


@pytest.fixture(autouse=True)
def _no_task_cluster_heartbeats(settings, tmp_path):
    """Cluster heartbeats are read from a folder of the test's own, so a `make run` cluster in
    the same checkout never makes a test believe a worker is running (test_qcluster opts back in)."""
    settings.CACHES = {
        **settings.CACHES,
        "task_cluster": {**settings.CACHES["task_cluster"], "LOCATION": str(tmp_path / "task-cluster")},
    }


@pytest.fixture
def knowledge_root(settings):
    """The test's KNOWLEDGE_ROOT; `make(agent_id, folder, files)` drops a sub-folder into it."""
    root = Path(settings.KNOWLEDGE_ROOT)

    def make(agent_id: str, folder: str, files: dict[str, str | bytes]) -> Path:
        target = root / agent_id / folder
        for name, content in files.items():
            path = target / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, str):
                path.write_text(content)
            else:
                path.write_bytes(content)
        return target

    make.root = root
    return make


@pytest.fixture(autouse=True)
def _own_index_dir(tmp_path, settings):
    """Each test's search indexes (and read-audit spool) live in its own folder, never in a deployment's
    DATA_DIR."""
    settings.INDEX_DIR = tmp_path / "indexes"
    settings.AUDIT_SPOOL_DIR = tmp_path / "audit-spool"


@pytest.fixture(autouse=True)
def _test_embedder(request, settings):
    """The deterministic "hash" embedder, unless a test is marked to use the real model."""
    if request.node.get_closest_marker("model") is None:
        settings.EMBED_BACKEND = "hash"


@pytest.fixture
def agent(db):
    from collections_app.services.agents import create_agent

    agent, _raw = create_agent(agent_id="alpha", name="Alpha")
    return agent


@pytest.fixture
def agent_key(db):
    """An agent and its raw API key."""
    from collections_app.services.agents import create_agent

    return create_agent(agent_id="keyed", name="Keyed")


@pytest.fixture
def knowledge_folder(tmp_path, monkeypatch):
    """Make a folder for one agent's collection and point KNOWLEDGE_<AGENT>__<NAME>_FOLDER at it.

    The agent-qualified variable, because the agent-less one serves only a collection staff bound to it.
    """
    from collections_app.conf import folder_variable

    def make(
        collection_name: str,
        files: dict[str, str | bytes] | None = None,
        samples: bool = False,
        agent: str = "alpha",
    ) -> Path:
        folder = tmp_path / f"deployment-secret-{collection_name}"
        folder.mkdir(parents=True, exist_ok=True)
        if samples:
            for path in SAMPLE_DOCS.iterdir():
                if path.suffix in (".md", ".txt", ".html", ".docx", ".pdf"):
                    shutil.copy(path, folder / path.name)
        for name, content in (files or {}).items():
            target = folder / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, str):
                target.write_text(content)
            else:
                target.write_bytes(content)
        monkeypatch.setenv(folder_variable(collection_name, agent), str(folder))
        return folder

    return make
