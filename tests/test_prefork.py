"""What the web master does before forking (ragsite/prefork.py), in this process."""

import gc
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from ragsite import embedding, lexical, prefork

ROOT = Path(__file__).resolve().parents[1]


def test_warm_builds_the_urlconf_and_term_tables_and_leaves_an_http_embedder_alone(settings, monkeypatch):
    settings.EMBED_BACKEND = "http"
    monkeypatch.setattr(embedding, "get_embedder", lambda *a: pytest.fail("an http embedder was built"))
    lexical._tables.cache_clear()
    assert prefork.warm() == ["urlconf", "lexical tables"]
    assert lexical._tables.cache_info().currsize == 1


# In a fresh interpreter: the library's pool is process-wide, and another test may have started it here.
FORKED_AFTER_WARM_UP = """
import os, sys
import django
django.setup()
from ragsite import embedding, prefork
prefork.warm()
pid = os.fork()
if pid == 0:
    vectors = embedding.get_embedder().embed(["a question"] * 64)
    os._exit(0 if vectors.shape == (64, 384) else 3)
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""


@pytest.mark.model
def test_a_worker_forked_after_the_warm_up_embeds_even_with_tokenizers_parallelism_on(tmp_path):
    """With TOKENIZERS_PARALLELISM=true a child forked after its parent's tokenizer ran in parallel
    hangs in its first batch; the warm-up keeps the library's pool from starting in the master."""
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "ragsite.settings", "EMBED_BACKEND": "local",
           prefork.TOKENIZERS_PARALLELISM: "true", "EMBED_CACHE_DIR": str(tmp_path)}
    child = subprocess.Popen([sys.executable, "-c", FORKED_AFTER_WARM_UP], cwd=ROOT, env=env,
                             start_new_session=True, stderr=subprocess.PIPE, text=True)
    try:
        _, errors = child.communicate(timeout=90)
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        pytest.fail("the process forked after the warm-up never finished embedding")
    assert child.returncode == 0, errors[-2000:]


@pytest.mark.model
def test_warm_embeds_with_the_local_model_and_leaves_tokenizers_parallelism_as_it_was(settings, monkeypatch):
    settings.EMBED_BACKEND = "local"
    monkeypatch.delenv(prefork.TOKENIZERS_PARALLELISM, raising=False)
    assert prefork.warm()[-1] == "local embedder"
    assert prefork.TOKENIZERS_PARALLELISM not in os.environ
    monkeypatch.setenv(prefork.TOKENIZERS_PARALLELISM, "true")
    prefork.warm()
    assert os.environ[prefork.TOKENIZERS_PARALLELISM] == "true"


@pytest.mark.django_db(transaction=True)
def test_before_fork_closes_the_database_connection_and_freezes_the_heap():
    connection.ensure_connection()
    try:
        prefork.before_fork()
        assert connection.connection is None
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
