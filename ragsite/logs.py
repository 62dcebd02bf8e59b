"""Log records that cannot leak credentials: upstream URLs lose their userinfo and query.

httpx logs every request it makes at INFO ("HTTP Request: POST <url> ..."). An `EMBED_URL`
or `JUDGE_URL` may carry a password (`https://user:pass@host`) or a key in its query
(`?api_key=…`); this filter, on the console handler, rewrites any URL in a record's
arguments to scheme, host, port and path before the record is formatted
(docs/decisions/0054).
"""

import json
import logging
import re
import uuid
from contextvars import ContextVar
from datetime import UTC, datetime
from urllib.parse import urlsplit, urlunsplit

from ragsite.tracing import current_trace_id

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


class WithoutInstallPaths(logging.Formatter):
    """Writes a record, its traceback included, with this installation's folders as placeholders.

    A traceback names every file it passes through: the checkout (`<ragsite>`), the Python and its
    packages (`<python>`), and a deployment's data and knowledge folders (`<data>`, `<knowledge>`).
    Django logs one for an admin PermissionDenied (WARNING) and for each 500 (ERROR), so without this
    a log at INFO would carry the deployment's paths (docs/configuration.md, LOG_LEVEL).
    """

    _roots: list[tuple[str, str]] | None = None

    def format(self, record: logging.LogRecord) -> str:
        return self.without_paths(super().format(record))

    @classmethod
    def roots(cls) -> list[tuple[str, str]]:
        """(folder, placeholder) pairs, longest folder first so a nested one is replaced whole."""
        if cls._roots is None:
            import sys
            import sysconfig
            from pathlib import Path

            from django.conf import settings

            named = [
                (getattr(settings, "BASE_DIR", None), "<ragsite>"),
                (sys.prefix, "<python>"),
                (sys.base_prefix + "/lib", "<python>/lib"),
                (sys.exec_prefix, "<python>"),
            ]
            paths = sysconfig.get_paths()
            named += [(paths.get(key), "<python>") for key in ("stdlib", "purelib", "platlib")]
            named += [
                (getattr(settings, name, None), placeholder)
                for name, placeholder in (
                    ("DATA_DIR", "<data>"),
                    ("INDEX_DIR", "<data>/indexes"),
                    ("MEDIA_ROOT", "<data>/media"),
                    ("KNOWLEDGE_ROOT", "<knowledge>"),
                )
            ]
            pairs = set()
            for folder, placeholder in named:
                if not folder or str(folder) in ("/", "."):
                    continue
                for form in {str(folder), str(Path(folder).resolve())}:
                    pairs.add((form.rstrip("/"), placeholder))
            cls._roots = sorted(pairs, key=lambda pair: -len(pair[0]))
        return cls._roots

    def without_paths(self, text: str) -> str:
        for root, placeholder in self.roots():
            text = text.replace(root, placeholder)
        return text


# The request being answered, for the log lines written while it is (config.middleware.RequestId).
_request_id: ContextVar[str] = ContextVar("ragsite_request_id", default="")
REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def set_request_id(given: str | None):
    """This request's id: the caller's `X-Request-ID` when it is a plain token, else a new one. Returns
    (id, token to reset with)."""
    value = given if given and REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
    return value, _request_id.set(value)


def reset_request_id(token) -> None:
    _request_id.reset(token)


class WithRequestId(logging.Filter):
    """Puts the request's id (empty outside a request) on every record as `request_id`."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = _request_id.get()
        return True


class JsonLines(WithoutInstallPaths):
    """One JSON object a line (`LOG_FORMAT=json`): time, level, logger, message, request id, and the
    traceback when there is one, with the installation's folders as placeholders as in plain logs."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": self.without_paths(record.getMessage()),
            "request_id": getattr(record, "request_id", "") or None,
            "trace_id": current_trace_id() or None,
        }
        if record.exc_info:
            entry["exception"] = self.without_paths(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


# django-q2's lines that repeat while nothing happens: a task made from a schedule (three sweeps a
# minute), each task processed or enqueued, each process starting or stopping its loop. Failures and
# the cluster's own start and stop stay at their level.
TASK_CLUSTER_ROUTINE = (
    "created task",
    " processing ",  # django-q2 1.11's worker: "<process> processing <task> '<function>' [<schedule>]"
    "Processed '",
    "Enqueued [",
    "ready for work at",
    "stopped doing work",
    "guarding cluster",
    "monitoring at",
    "stopped monitoring",
    "pushing tasks at",
    "stopped pushing",
    "waiting for the monitor",
    "stopping cluster processes",
    "recycled worker",
)


class TaskClusterRoutine(logging.Filter):
    """On the `django-q` logger: its routine INFO lines become DEBUG, shown only when LOG_LEVEL is DEBUG,
    so a console keeps what a person needs (a build, a failure, the cluster starting and stopping)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno != logging.INFO:
            return True
        message = record.getMessage()
        if not any(phrase in message for phrase in TASK_CLUSTER_ROUTINE):
            return True
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
