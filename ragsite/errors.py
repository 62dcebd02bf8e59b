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
