"""Row locks a web request waits on briefly: past a short wait the request answers 503 `store_busy` with
Retry-After, rather than holding a web thread as long as another transaction keeps the row.

SQLite bounds every wait with its busy timeout already (config/settings.py). PostgreSQL waits for a row
lock without end unless told: `short_lock_waits` sets `lock_timeout` for the transaction it opens (or
the caller's, which it joins), checks the block's deferred foreign keys before it ends, and a wait that
runs out (lock_not_available) becomes `StoreBusy`.
"""

from contextlib import contextmanager

from .errors import store_busy

LOCK_WAIT_MS = 2000  # a build's own commit holds a collection's row for far less


@contextmanager
def short_lock_waits(using: str = "default", *, check_keys: bool = False):
    """`check_keys`: the block writes rows whose foreign keys point at rows another transaction may
    hold (a sync setting at its collection); they are checked before the block ends."""
    from django.db import OperationalError, connections, transaction

    try:
        with transaction.atomic(using=using):
            connection = connections[using]
            postgresql = connection.vendor == "postgresql"
            if postgresql:
                with connection.cursor() as cursor:
                    cursor.execute("SELECT set_config('lock_timeout', %s, true)", [f"{LOCK_WAIT_MS}ms"])
            yield
            if postgresql and check_keys:
                # Foreign keys are checked at commit (deferred), where a wait on the row they point at
                # would time out outside this block: check them here, where it is a 503.
                connection.check_constraints()
    except OperationalError as exc:
        busy = store_busy(exc)
        if busy is None:
            raise
        raise busy from None
