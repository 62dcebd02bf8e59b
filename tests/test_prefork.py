"""What the web master does before forking (config/prefork.py), in this process."""

import gc
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from django.db import connection

from config import prefork
from ragsite import embedding, lexical

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
from config import prefork
from ragsite import embedding
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
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "EMBED_BACKEND": "local",
        prefork.TOKENIZERS_PARALLELISM: "true",
        "EMBED_CACHE_DIR": str(tmp_path),
    }
    child = subprocess.Popen(
        [sys.executable, "-c", FORKED_AFTER_WARM_UP],
        cwd=ROOT,
        env=env,
        start_new_session=True,
        stderr=subprocess.PIPE,
        text=True,
    )
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


# In a fresh interpreter, so that no arena made by this test process's own threads is counted: threads
# each holding malloc'd blocks (bytearrays above Python's small-object allocator) while the heaps are counted.
THREADS_ALLOCATING = """
import ctypes, os, re, sys, tempfile, threading
from config import prefork
if sys.argv[1] == "limited":
    assert prefork.malloc_arenas(1)
held, ready, done = [], threading.Barrier(5), threading.Event()
def allocate():
    held.append([bytearray(4096) for _ in range(256)])
    ready.wait()
    done.wait()
threads = [threading.Thread(target=allocate) for _ in range(4)]
for thread in threads:
    thread.start()
ready.wait()
libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]
with tempfile.TemporaryDirectory() as folder:
    path = os.path.join(folder, "malloc.xml")
    handle = libc.fopen(path.encode(), b"w")
    libc.malloc_info(0, handle)
    libc.fclose(handle)
    print(len(re.findall('<heap nr=', open(path).read())))
done.set()
"""


@pytest.mark.skipif(not prefork.glibc(), reason="malloc arenas are glibc's")
def test_threads_started_after_malloc_arenas_1_share_the_main_arena():
    # glibc's own defaults: no arena limit from the environment
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES"))}

    def heaps(arm: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", THREADS_ALLOCATING, arm],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return int(done.stdout)

    assert heaps("default") > 1  # each thread its own arena: what a worker did before
    assert heaps("limited") == 1


def test_malloc_arenas_changes_nothing_without_glibc(monkeypatch):
    monkeypatch.setattr(os, "confstr", lambda name: "musl")
    monkeypatch.setattr(prefork.ctypes, "CDLL", lambda name: pytest.fail("a C library was asked"))
    assert prefork.malloc_arenas(1) is False
