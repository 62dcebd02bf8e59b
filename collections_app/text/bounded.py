"""Extraction with a wall-clock limit and a memory cap per document.

A small hostile file can hold a worker for hours or take gigabytes (an 816 KB DOCX
reached 1.6 GB, a 53 KB PDF ran past 300 s: docs/decisions/0020). Extraction therefore runs in a
child process (`python -m collections_app.text.bounded`: no Django, no database connection, no
inherited threads), whose address space is capped with `RLIMIT_AS`. The parent waits at
most the time limit for each document; a child that overruns is killed and a fresh one is
started for the next document, and a child that runs out of memory or dies answers for that
document alone. The build goes on with the rest.

The child answers in JSON, never pickle: a document that subverted a parser in the child
still could not make the parent run anything.

Pure in the house sense: no models, no settings; the limits are passed in.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from .blocks import PageStart
from .extract import CORRUPT, TIMED_OUT, TOO_LARGE, Extracted, Unreadable, extract
from .ocr import OcrOptions

_LENGTH = struct.Struct("<Q")

logger = logging.getLogger("ragsite.builds")

# Rendering one page for OCR, on top of the page's own OCR limit: generous, since a page is rendered
# within OCR_MAX_PIXELS.
OCR_RENDER_SECONDS = 10.0

# How much of a child's stderr is kept: enough for the end of a traceback or a fatal error.
STDERR_TAIL = 2048
# Anything that looks like a file path: the server's layout stays out of the log summary.
_PATH = re.compile(r"""(?:[A-Za-z]:)?(?:[\\/][^\s"'\\/:,()]+)+[\\/]?""")


@dataclass(frozen=True)
class Limits:
    seconds: float  # wall-clock per document
    memory_bytes: int  # the child's address space (0: no cap)
    ocr: OcrOptions | None = None  # None: scans and images are not read by OCR


class BoundedExtractor:
    """One child process, reused from document to document, replaced when it must be killed."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self._child: subprocess.Popen | None = None
        self._stderr: _Tail | None = None
        self._answered = 0  # documents the current child answered
        self._lock = threading.Lock()

    def extract(self, name: str, data: bytes) -> Extracted:
        """`extract.extract(name, data)` within the limits; raises `Unreadable` with a category."""
        with self._lock:
            child = self._start()
            seconds = self.limits.seconds
            deadline = time.monotonic() + seconds
            try:
                encoded = name.encode("utf-8")
                child.stdin.write(_LENGTH.pack(len(encoded)) + encoded + _LENGTH.pack(len(data)))
                child.stdin.write(data)
                child.stdin.flush()
                answer = _read_frame(child.stdout, deadline)
                while "ocr_page" in answer:
                    # The child starts OCR on a page: that page has its own limit (OCR_PAGE_SECONDS),
                    # on top of the document's. A child that says so more often than it may is stopped.
                    if self.limits.ocr is None or answer["ocr_page"] > self.limits.ocr.max_pages:
                        raise ValueError("more OCR pages than allowed")
                    seconds += self.limits.ocr.page_seconds + OCR_RENDER_SECONDS
                    deadline += self.limits.ocr.page_seconds + OCR_RENDER_SECONDS
                    answer = _read_frame(child.stdout, deadline)
            except TimeoutError:
                self._stop()
                reason = f"extraction took longer than {seconds:g} s"
                raise Unreadable(reason, category=TIMED_OUT) from None
            except (EOFError, OSError, ValueError) as exc:
                # The child died under the document: the memory cap's verdict, or a crash. Why is
                # told in the server log only (the build keeps the category, never the child's words).
                self._report_death(exc, self._stop(grace=1.0))
                reason = "the extractor ran out of memory or crashed on this document"
                raise Unreadable(reason, category=TOO_LARGE) from None
            self._answered += 1
            if not answer["ok"] and answer["category"] == TOO_LARGE:
                # A child that reached its memory cap may not have room left even for a small
                # document: the next one gets a fresh child.
                self._stop()
        if answer["ok"]:
            return Extracted(
                text=answer["text"],
                warnings=answer["warnings"],
                ocr_pages=answer["ocr_pages"],
                notes=answer["notes"],
                pages=tuple(PageStart(offset, page) for offset, page in answer["pages"]),
            )
        raise Unreadable(answer["reason"], category=answer["category"])

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _start(self) -> subprocess.Popen:
        if self._child is None or self._child.poll() is not None:
            self._stop()
            self._child = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "collections_app.text.bounded",
                    str(self.limits.memory_bytes),
                    json.dumps(self.limits.ocr.as_json() if self.limits.ocr else None),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                close_fds=True,
            )
            self._stderr, self._answered = _Tail(self._child.stderr), 0
        return self._child

    def _stop(self, grace: float = 0.0) -> tuple[int | None, bytes]:
        """Stop the child, after `grace` seconds to end by itself (a crashing child may still be
        unwinding); its own exit status (None: it was still running) and the end of its stderr."""
        child, self._child = self._child, None
        tail, self._stderr = self._stderr, None
        if child is None:
            return None, b""
        try:
            status = child.wait(timeout=grace) if grace else child.poll()
        except subprocess.TimeoutExpired:
            status = None
        if status is None:
            child.kill()
        child.wait(timeout=10)
        for stream in (child.stdin, child.stdout):
            try:
                stream.close()
            except OSError:
                pass
        return status, tail.collect() if tail is not None else b""

    def _report_death(self, seen: Exception, stopped: tuple[int | None, bytes]) -> None:
        status, tail = stopped
        when = "before answering any document" if not self._answered else f"after {self._answered} documents"
        # A child still running when the parent gave up points at the parent's side (its pipes).
        logger.warning(
            "the extraction child failed %s (%s; the worker saw %s): %s",
            when,
            exit_status(status),
            type(seen).__name__,
            stderr_summary(tail),
        )


class _Tail:
    """The last STDERR_TAIL bytes a child writes to stderr, read by a thread so that the child never
    blocks on a full pipe."""

    def __init__(self, stream):
        self._stream, self._kept = stream, bytearray()
        self._thread = threading.Thread(target=self._drain, name="extraction-stderr", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        fd = self._stream.fileno()
        try:
            while chunk := os.read(fd, 4096):
                self._kept += chunk
                del self._kept[:-STDERR_TAIL]
        except OSError:
            pass

    def collect(self) -> bytes:
        """After the child ended: what it wrote last (the pipe is at its end, so this is quick)."""
        self._thread.join(timeout=2)
        try:
            self._stream.close()
        except OSError:
            pass
        return bytes(self._kept)


def exit_status(code: int | None) -> str:
    if code is None:
        return "still running, stopped by the worker"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"


def stderr_summary(tail: bytes, limit: int = 240) -> str:
    """The last meaningful line a dead child wrote, without file paths, escaped for one log line.

    A traceback ends with the exception ("MemoryError", "ModuleNotFoundError: ..."); its "File ..."
    lines and anything shaped like a path are left out, so the log never shows the server's layout."""
    lines = [line.strip() for line in tail.decode("utf-8", "replace").splitlines()]
    lines = [line for line in lines if line and not line.startswith(("File ", "^", "~"))]
    if not lines:
        return "nothing on stderr"
    return repr(_PATH.sub("<path>", lines[-1])[:limit])


def _readable(fd: int, seconds: float) -> bool:
    """Whether `fd` has data (or its end) within `seconds`. poll, not select: select refuses
    descriptors numbered 1024 or more, which a worker holding many index mappings reaches."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)  # POLLHUP and POLLERR are always reported
    return bool(poller.poll(max(1, math.ceil(seconds * 1000))))


def _read_exactly(stream, size: int, deadline: float | None) -> bytes:
    chunks, wanted = [], size
    fd = stream.fileno()
    while wanted:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not _readable(fd, left):
                raise TimeoutError
        chunk = os.read(fd, min(wanted, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        wanted -= len(chunk)
    return b"".join(chunks)


def _read_frame(stream, deadline: float) -> dict:
    (size,) = _LENGTH.unpack(_read_exactly(stream, _LENGTH.size, deadline))
    return json.loads(_read_exactly(stream, size, deadline))


def _answer(name: str, data: bytes, ocr: OcrOptions | None = None, on_ocr_page=None) -> dict:
    """What the child sends back for one document."""
    try:
        extracted = extract(name, data, ocr=ocr, on_ocr_page=on_ocr_page)
        return {
            "ok": True,
            "text": extracted.text,
            "warnings": list(extracted.warnings),
            "pages": [[mark.offset, mark.page] for mark in extracted.pages],
            "ocr_pages": extracted.ocr_pages,
            "notes": list(extracted.notes),
        }
    except Unreadable as exc:
        if isinstance(exc.__cause__, MemoryError):
            return {
                "ok": False,
                "reason": "extracting it needs more memory than allowed",
                "category": TOO_LARGE,
            }
        return {"ok": False, "reason": exc.reason, "category": exc.category}
    except MemoryError:
        return {"ok": False, "reason": "extracting it needs more memory than allowed", "category": TOO_LARGE}
    except RecursionError:
        return {"ok": False, "reason": "nested too deeply to read", "category": CORRUPT}
    except Exception as exc:  # a library's failure on hostile input; the reason names only its type
        return {"ok": False, "reason": f"the extractor failed ({type(exc).__name__})", "category": CORRUPT}


def serve(memory_bytes: int, ocr: OcrOptions | None = None) -> None:  # pragma: no cover - the child
    """The child: cap the address space, then extract documents until stdin closes."""
    import resource

    if memory_bytes:
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    while True:
        try:
            (size,) = _LENGTH.unpack(_read_exactly(stdin, _LENGTH.size, None))
            name = _read_exactly(stdin, size, None).decode("utf-8")
            (size,) = _LENGTH.unpack(_read_exactly(stdin, _LENGTH.size, None))
            data = _read_exactly(stdin, size, None)
        except EOFError:
            return
        answer = _answer(name, data, ocr, on_ocr_page=lambda count: _send(stdout, {"ocr_page": count}))
        del data
        try:
            body = json.dumps(answer).encode("utf-8")
        except MemoryError:
            body = json.dumps(
                {"ok": False, "reason": "its text needs more memory than allowed", "category": TOO_LARGE}
            ).encode("utf-8")
        stdout.write(_LENGTH.pack(len(body)) + body)
        stdout.flush()


def _send(stdout, message: dict) -> None:  # pragma: no cover - runs in the child process
    body = json.dumps(message).encode("utf-8")
    stdout.write(_LENGTH.pack(len(body)) + body)
    stdout.flush()


_shared: dict[Limits, BoundedExtractor] = {}
_shared_lock = threading.Lock()


def bounded_extractor(limits: Limits) -> BoundedExtractor:
    """One extractor per process per set of limits: a build does not pay for a new child."""
    with _shared_lock:
        extractor = _shared.get(limits)
        if extractor is None:
            extractor = _shared[limits] = BoundedExtractor(limits)
        return extractor


if __name__ == "__main__":  # pragma: no cover
    _ocr = json.loads(sys.argv[2]) if len(sys.argv) > 2 else None
    serve(int(sys.argv[1]), OcrOptions.from_json(_ocr) if _ocr else None)
