"""The local embedder across `fork`: a gunicorn worker forked from a warmed master (and a django-q
worker forked from its cluster) embeds with worker threads of its own, exactly as its parent did."""

import os
import pickle
import select
import signal
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from ragsite.embedders import LocalEmbedder

# Three long texts make three batches at batch_size 1, so they go through the embedder's pool.
TEXTS = [
    "annual leave carries over up to five days " * 12,
    "badges are worn on site at all times " * 12,
    "mileage is reimbursed per kilometre " * 12,
]


def in_forked_child(work, timeout: float = 60):
    """What `work()` returns in a child forked now; fails if it does not answer within `timeout`
    (a child waiting on threads it did not inherit waits forever)."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: answer and leave without running the parent's cleanup
        os.close(read)
        try:
            answer = pickle.dumps(("ok", work()))
        except BaseException as exc:  # noqa: BLE001 (reported to the parent, which fails)
            answer = pickle.dumps(("error", repr(exc)))
        os.write(write, answer)
        os._exit(0)
    os.close(write)
    try:
        ready, _, _ = select.select([read], [], [], timeout)
        if not ready:
            os.kill(pid, signal.SIGKILL)
            pytest.fail(f"the forked child did not answer within {timeout} s")
        chunks = []
        while chunk := os.read(read, 1 << 20):
            chunks.append(chunk)
    finally:
        os.close(read)
        os.waitpid(pid, 0)
    status, value = pickle.loads(b"".join(chunks))
    assert status == "ok", value
    return value


def test_a_forked_child_gets_a_new_pool_and_lock_not_its_parents():
    embedder = LocalEmbedder(threads=2)  # nothing is loaded: the model is not needed here
    parent_pool = ThreadPoolExecutor(2)
    list(parent_pool.map(abs, [-1, -2, -3]))  # its threads ran, and sit idle in the parent
    embedder._pool = parent_pool
    held = embedder._lock
    held.acquire()  # as if another thread of the parent was loading the model at the fork
    try:
        pool_is_gone, lock_is_free = in_forked_child(
            lambda: (embedder._pool is None, embedder._lock.acquire(False))
        )
    finally:
        held.release()
        parent_pool.shutdown()
    assert pool_is_gone and lock_is_free
    assert embedder._pool is parent_pool  # the parent's own is untouched


@pytest.mark.model
def test_a_child_forked_after_its_parent_embedded_with_threads_embeds_the_same_vectors_with_threads():
    embedder = LocalEmbedder(threads=2, batch_size=1)
    before = embedder.embed(TEXTS)
    assert embedder._pool is not None  # the parent's threads ran

    def child():
        vectors = embedder.embed(TEXTS)
        return vectors, embedder._pool is not None, len(embedder._pool._threads)

    vectors, has_pool, threads = in_forked_child(child)
    assert np.array_equal(vectors, before)
    assert has_pool and threads == 2
