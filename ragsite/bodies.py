"""Reading a JSON request body the same strict way on every surface (API, MCP, embedding endpoints).

`json.loads` accepts things the rest of the server cannot use: nesting deep enough to exhaust
the stack (a `RecursionError`, once a 500 HTML page), `NaN`/`Infinity`, and lone surrogates
(`"\\udfff"`, valid JSON that no tokenizer, database or UTF-8 encoder accepts; once a 500 in
memory, MCP and the embedding endpoints). Each is refused here as a 400 with the one error shape.
"""

import json
import math
from collections.abc import Mapping

from .errors import RagsiteError


class BadBody(RagsiteError):
    status = 400
    code = "malformed_json"


def _reject_constant(name: str):
    raise BadBody(f"the request body holds {name}, which is not a number JSON allows")


def parse_json(raw: bytes | str) -> object:
    """The body as Python values, or `BadBody` saying what is wrong with it."""
    try:
        data = json.loads(raw, parse_constant=_reject_constant)
    except RecursionError:
        raise BadBody("the request body is nested too deeply") from None
    except UnicodeDecodeError:
        raise BadBody("the request body is not UTF-8") from None
    except ValueError:
        raise BadBody("the request body is not valid JSON") from None
    if not encodable(data):
        raise BadBody(
            "the request body holds a lone surrogate (\\ud800-\\udfff), which is not text",
            code="invalid_text",
        )
    return data


# The widest integer a JSON number carries exactly everywhere (a double's 53-bit mantissa, JavaScript's
# Number.MAX_SAFE_INTEGER + 1). Python's json reads any integer, and one past float's range raises
# OverflowError wherever it meets a float: every number a request or a sidecar gives is bounded here first.
SAFE_INTEGER = 2**53


def bounded_number(value: object) -> bool:
    """True for a JSON number the server can use as given: an integer within ±2**53 or a finite float
    (never a bool, which Python counts as an integer)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -SAFE_INTEGER <= value <= SAFE_INTEGER
    return isinstance(value, float) and math.isfinite(value)


def encodable(value: object) -> bool:
    """True when every string in `value` (keys included) can be written as UTF-8."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def refuse_nul(value: object, *, field: str) -> None:
    """Refuse a NUL anywhere in `value`'s strings, as `invalid_text`, before it is stored.

    PostgreSQL's text and jsonb cannot hold U+0000 (a DataError, once a 500) and SQLite can: refusing
    it in every stored text field keeps the two stores alike. Fields only compared, never stored (a
    reader's name, onBehalfOf), are not refused: there it answers as an unknown name would.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                raise RagsiteError(f"{field} must not contain NUL characters (U+0000)", code="invalid_text")
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)


def json_object_of(request, max_bytes: int) -> dict:
    """A request's body as a JSON object, read no further than ``max_bytes`` (413 past it, whatever
    Content-Length claims); malformed JSON keeps its code (`BadBody`), anything but an object is a 400."""
    try:
        declared_length = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared_length = 0
    raw = b"" if declared_length > max_bytes else request.read(max_bytes + 1)
    if declared_length > max_bytes or len(raw) > max_bytes:
        raise RagsiteError(f"a request body is at most {max_bytes} bytes", code="too_large", status=413)
    try:
        body = parse_json(raw or b"null")
    except BadBody as exc:  # the JSON API's code for the same body
        raise RagsiteError(exc.message, code=exc.code) from None
    if not isinstance(body, dict):
        raise RagsiteError("the request body must be a JSON object", code="invalid_request")
    return body
