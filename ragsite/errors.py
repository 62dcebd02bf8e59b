"""The one error type services raise, and the one shape every interface answers with.

A service raises `RagsiteError(code, message, status=...)`; the API, the MCP
endpoint and the management commands turn it into `{"error": {"code", "message"}}`,
a JSON-RPC error, or a non-zero exit, without knowing which service raised it.
"""


class RagsiteError(Exception):
    """A refusal a caller can act on: a stable code, a sentence, an HTTP status."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None, status: int | None = None, headers=None):
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code
        if status is not None:
            self.status = status
        self.headers = dict(headers or {})

    def as_dict(self) -> dict:
        return error_body(self.code, self.message)


class NotFound(RagsiteError):
    status = 404
    code = "not_found"


class Forbidden(RagsiteError):
    status = 403
    code = "forbidden"


class Conflict(RagsiteError):
    status = 409
    code = "conflict"


class TooManyRequests(RagsiteError):
    status = 429
    code = "rate_limited"


def error_body(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


# How long a caller is asked to wait when the store is busy: SQLite's write lock is held for one
# transaction, and a build commits in short ones, so a few seconds is usually enough.
STORE_BUSY_RETRY_SECONDS = 5


class StoreBusy(RagsiteError):
    status = 503
    code = "store_busy"


def store_busy(exc: BaseException) -> StoreBusy | None:
    """The 503 to answer when `exc` is the store refusing a lock (SQLite "database is locked", PostgreSQL
    lock_not_available), or None for any other error: a busy store is a wait, never a 500."""
    from django.db import OperationalError

    if not isinstance(exc, OperationalError):
        return None
    cause = exc.__cause__ or exc
    locked = "database is locked" in str(exc) or "database table is locked" in str(exc)
    # psycopg 3 names the SQLSTATE `sqlstate` (psycopg2 called it `pgcode`).
    state = getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)
    if not locked and state != "55P03":
        return None
    return StoreBusy(
        f"the store is busy with another write; retry in {STORE_BUSY_RETRY_SECONDS} seconds",
        headers={"Retry-After": str(STORE_BUSY_RETRY_SECONDS)},
    )
