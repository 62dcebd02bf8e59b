"""The processes that tokenize an index's blocks of rows beside the one that reads and merges them."""

from __future__ import annotations

from collections import deque
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from multiprocessing import get_context


@contextmanager
def tokenizers(rows: int, processes: int, rows_per_block: int):
    """Processes that tokenize blocks of rows while this one reads the next and merges (None: tokenize
    here): ``processes`` of them, for a collection of more than a few blocks. Spawned, not forked: a
    web or task worker may hold threads and locks a fork would copy mid-use."""
    if processes <= 1 or rows <= 2 * rows_per_block:
        yield None
        return
    with ProcessPoolExecutor(max_workers=processes, mp_context=get_context("spawn")) as pool:
        yield pool


def in_order(pool: ProcessPoolExecutor | None, work, jobs, most: int):
    """``(block, work(*args))`` for each ``(block, args)`` of ``jobs``, in order; with a pool, ``most``
    blocks ahead at most (never every row's text in memory at once)."""
    if pool is None:
        for block, args in jobs:
            yield block, work(*args)
        return
    ahead: deque = deque()
    for block, args in jobs:
        ahead.append((block, pool.submit(work, *args)))
        if len(ahead) > most:
            done, future = ahead.popleft()
            yield done, future.result()
    while ahead:
        done, future = ahead.popleft()
        yield done, future.result()
