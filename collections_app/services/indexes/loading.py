"""Loading a large build's index off the request: one background thread per collection and build in a
process, which searches wait for a bounded time and then answer 503 `index_loading` with Retry-After.

A search never waits for a fetch (or, when nothing is stored, a write from the rows) longer than
INDEX_LOAD_WAIT seconds: the fetch of a 100k-paragraph index takes seconds and writing it from the rows
took 28 s (docs/decisions/0048). The thread holds no lock other searches need: other collections,
and this one's searches once the files are in place, go on (services.indexes keeps its folder lock
per collection).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TypeVar

from django.db import connections

from ragsite.errors import RagsiteError

logger = logging.getLogger("ragsite.search")

INDEX_LOADING = "index_loading"
# What a 503 asks the caller to wait: about a 100k index's fetch on a busy machine (docs/decisions/0048).
RETRY_SECONDS = 5

T = TypeVar("T")


class _Load:
    """One load under way: set when it ended, with its result or its exception."""

    def __init__(self) -> None:
        self.ended = threading.Event()
        self.result = None
        self.error: BaseException | None = None


_loads: dict[tuple[int, str], _Load] = {}
_loads_lock = threading.Lock()


def load_in_background(*, collection_id: int, name: str, key: str, job: Callable[[], T], wait: float) -> T:
    """`job`'s result when it ends within `wait` seconds (started now unless this process runs it for
    this build already); else RagsiteError 503 `index_loading` with Retry-After. A job that failed
    raises its exception in every search that waited for it; the next search starts it again."""
    ident = (collection_id, key)
    with _loads_lock:
        load = _loads.get(ident)
        if load is None:
            load = _loads[ident] = _Load()
            threading.Thread(
                target=_run, args=(ident, load, job), name=f"index-load-c{collection_id}", daemon=True
            ).start()
    if load.ended.wait(max(0.0, wait)):
        if load.error is not None:
            raise load.error
        return load.result
    raise RagsiteError(
        f'the search index of "{name}" is being loaded on this server; retry in {RETRY_SECONDS} seconds',
        code=INDEX_LOADING,
        status=503,
        headers={"Retry-After": str(RETRY_SECONDS)},
    )


def loading(collection_id: int) -> bool:
    """Whether this process is loading some build's index of the collection now."""
    return any(ident[0] == collection_id for ident in list(_loads))


def _run(ident: tuple[int, str], load: _Load, job: Callable) -> None:
    # A thread of its own: its own connection, as the tables' owner (no agent's scope, like a command).
    try:
        load.result = job()
    except BaseException as exc:  # noqa: BLE001 - handed to every search that waits for it
        load.error = exc
        logger.warning("index of collection %s not loaded: %s", ident[0], type(exc).__name__)
    finally:
        connections.close_all()
        load.ended.set()
        with _loads_lock:  # the next search that misses the files starts a load again
            if _loads.get(ident) is load:
                del _loads[ident]


__all__ = ["INDEX_LOADING", "RETRY_SECONDS", "load_in_background", "loading"]
