"""What a preforking web master (gunicorn with `preload_app`) does before and after it forks workers.

A forked worker shares every memory page of its master until one of the two writes to it. So the
master builds, once, what each worker would otherwise build for itself on its first requests (the
URLconf, the lexical term tables, the local model's tokenizers and mapped weights, numpy's and the
BLAS library's lazily made state), forgets what must not cross a fork (database connections), and
moves every object it holds into the garbage collector's permanent generation (`gc.freeze`), so
that a collection in a worker does not write into the header of every inherited object and copy
its page. Each worker then holds its threads to one malloc arena (`after_fork`).
config/gunicorn_conf.py calls these; docs/decisions/0030 says what each step measured.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os

logger = logging.getLogger("ragsite.prefork")

# A question like an agent's: long enough to go through every layer of the model once.
WARM_QUESTION = "How many leave days carry over into the next year?"
# The HF tokenizers library's thread pool does not survive a fork: a child forked after its parent
# used it, with parallelism set on, waits forever in its first batch (measured: the child hangs).
# The master's warm-up therefore runs with it off; see `_warm_local_embedder`.
TOKENIZERS_PARALLELISM = "TOKENIZERS_PARALLELISM"
# glibc gives each thread that allocates a malloc arena of its own (up to 8 per core), and an arena
# keeps what a search freed for that thread's next one: a worker whose request threads had each
# served a search kept one search's memory per thread. Its threads share one arena instead; measured
# in docs/decisions/0031.
WORKER_MALLOC_ARENAS = 1
_M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h


def warm() -> list[str]:
    """Build in this process what every worker would otherwise build privately; the steps taken.

    Needs Django set up (the WSGI application loaded). Touches no database row and makes no
    network call: an `http` embedder is left alone, because a connection opened here would be one
    socket shared by every worker.
    """
    from django.urls import get_resolver

    from ragsite import lexical
    from ragsite.conf import settings

    steps = []
    resolver = get_resolver()
    resolver.resolve("/api/v1/openapi.json")
    resolver.reverse_dict  # noqa: B018  (builds the reverse look-up the admin's pages use)
    steps.append("urlconf")
    # Not ASCII, so the term tables are made here (an ASCII text's terms need none, lexical.terms).
    lexical.terms("\u00c9t\u00e9 " + WARM_QUESTION)
    steps.append("lexical tables")
    if settings.EMBED_BACKEND == "local":
        steps.append(_warm_local_embedder())
    return steps


def _warm_local_embedder() -> str:
    from ragsite.embedding import get_embedder

    # Off for the warm-up, whatever the deployment set, and the deployment's value put back: the
    # pool then never starts in the master, and each worker starts its own when it first needs one.
    chosen = os.environ.get(TOKENIZERS_PARALLELISM)
    os.environ[TOKENIZERS_PARALLELISM] = "false"
    try:
        get_embedder().embed([WARM_QUESTION])
    finally:
        if chosen is None:
            del os.environ[TOKENIZERS_PARALLELISM]
        else:
            os.environ[TOKENIZERS_PARALLELISM] = chosen
    return "local embedder"


def glibc() -> bool:
    """Whether this process's C library is glibc (malloc's arenas and `mallopt` are glibc's)."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError, AttributeError):  # no such name here: not glibc
        return False


def malloc_arenas(limit: int) -> bool:
    """Hold this process's glibc malloc to `limit` arenas for the threads it starts from now on.

    Whether it was set: False on a C library other than glibc (musl, macOS), where nothing changes.
    Arenas already made stay in use: set it before starting threads (a worker's master made only the
    main arena, as malloc_info shows in a worker just forked).
    """
    if not glibc():
        return False
    return ctypes.CDLL(None).mallopt(_M_ARENA_MAX, limit) == 1


def after_fork() -> None:
    """In a worker just forked, before its request threads start: they share WORKER_MALLOC_ARENAS."""
    malloc_arenas(WORKER_MALLOC_ARENAS)


def before_fork() -> None:
    """Close what must not be shared with a child, and freeze the heap the children inherit.

    Called before every fork (cheap after the first: only objects made since are moved).
    """
    from django.db import connections

    # A connection inherited by several processes is one socket used by all of them at once.
    connections.close_all()
    gc.freeze()
