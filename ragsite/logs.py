"""Log records that cannot leak credentials: upstream URLs lose their userinfo and query.

httpx logs every request it makes at INFO ("HTTP Request: POST <url> ..."). An `EMBED_URL`
or `JUDGE_URL` may carry a password (`https://user:pass@host`) or a key in its query
(`?api_key=…`); this filter, on the console handler, rewrites any URL in a record's
arguments to scheme, host, port and path before the record is formatted (D19).
"""

import logging
import re
from urllib.parse import urlsplit, urlunsplit

_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]*://[^\s\"'<>]+")


def redact_url(url: str) -> str:
    """`url` without userinfo, query or fragment: what may be written to a log."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{host}:{parts.port}" if parts.port else host
    except ValueError:
        return "<unparseable URL>"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _redact_text(text: str) -> str:
    return _URL.sub(lambda match: redact_url(match.group(0)), text)


class RedactUpstreamURLs(logging.Filter):
    """Rewrites URLs in a record's message and arguments; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str) and "://" in record.msg:
            record.msg = _redact_text(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(
                _redact_text(str(arg)) if "://" in str(arg) and not isinstance(arg, int | float) else arg
                for arg in record.args
            )
        return True
