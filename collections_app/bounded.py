"""Extraction with a wall-clock limit and a memory cap per document.

A small hostile file can hold a worker for hours or take gigabytes (the 2026-12-01 review:
an 816 KB DOCX reached 1.6 GB, a 53 KB PDF ran past 300 s). Extraction therefore runs in a
child process (`python -m collections_app.bounded`: no Django, no database connection, no
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
import os
import select
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

from .extract import CORRUPT, TIMED_OUT, TOO_LARGE, Extracted, Unreadable, extract

_LENGTH = struct.Struct("<Q")


@dataclass(frozen=True)
class Limits:
    seconds: float  # wall-clock per document
    memory_bytes: int  # the child's address space (0: no cap)


class BoundedExtractor:
    """One child process, reused from document to document, replaced when it must be killed."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self._child: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def extract(self, name: str, data: bytes) -> Extracted:
        """`extract.extract(name, data)` within the limits; raises `Unreadable` with a category."""
        with self._lock:
            child = self._start()
            deadline = time.monotonic() + self.limits.seconds
            try:
                encoded = name.encode("utf-8")
                child.stdin.write(_LENGTH.pack(len(encoded)) + encoded + _LENGTH.pack(len(data)))
                child.stdin.write(data)
                child.stdin.flush()
                answer = _read_frame(child.stdout, deadline)
            except TimeoutError:
                self._stop()
                reason = f"extraction took longer than {self.limits.seconds:g} s"
                raise Unreadable(reason, category=TIMED_OUT) from None
            except (EOFError, OSError, ValueError):
                # The child died under the document: the memory cap's verdict, or a crash.
                self._stop()
                reason = "the extractor ran out of memory or crashed on this document"
                raise Unreadable(reason, category=TOO_LARGE) from None
            if not answer["ok"] and answer["category"] == TOO_LARGE:
                # A child that reached its memory cap may not have room left even for a small
                # document: the next one gets a fresh child.
                self._stop()
        if answer["ok"]:
            return Extracted(text=answer["text"], warnings=answer["warnings"])
        raise Unreadable(answer["reason"], category=answer["category"])

    def close(self) -> None:
        with self._lock:
            self._stop()

    def _start(self) -> subprocess.Popen:
        if self._child is None or self._child.poll() is not None:
            self._stop()
            self._child = subprocess.Popen(
                [sys.executable, "-m", "collections_app.bounded", str(self.limits.memory_bytes)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
            )
        return self._child

    def _stop(self) -> None:
        child, self._child = self._child, None
        if child is None:
            return
        if child.poll() is None:
            child.kill()
        child.wait(timeout=10)
        for stream in (child.stdin, child.stdout):
            try:
                stream.close()
            except OSError:
                pass


def _read_exactly(stream, size: int, deadline: float | None) -> bytes:
    chunks, wanted = [], size
    fd = stream.fileno()
    while wanted:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
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


def _answer(name: str, data: bytes) -> dict:
    """What the child sends back for one document."""
    try:
        extracted = extract(name, data)
        return {"ok": True, "text": extracted.text, "warnings": list(extracted.warnings)}
    except Unreadable as exc:
        if isinstance(exc.__cause__, MemoryError):
            return {"ok": False, "reason": "extracting it needs more memory than allowed", "category": TOO_LARGE}
        return {"ok": False, "reason": exc.reason, "category": exc.category}
    except MemoryError:
        return {"ok": False, "reason": "extracting it needs more memory than allowed", "category": TOO_LARGE}
    except RecursionError:
        return {"ok": False, "reason": "nested too deeply to read", "category": CORRUPT}
    except Exception as exc:  # a library's failure on hostile input; the reason names only its type
        return {"ok": False, "reason": f"the extractor failed ({type(exc).__name__})", "category": CORRUPT}


def serve(memory_bytes: int) -> None:  # pragma: no cover - runs in the child process
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
        answer = _answer(name, data)
        del data
        try:
            body = json.dumps(answer).encode("utf-8")
        except MemoryError:
            body = json.dumps({"ok": False, "reason": "its text needs more memory than allowed",
                               "category": TOO_LARGE}).encode("utf-8")
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
    serve(int(sys.argv[1]))
