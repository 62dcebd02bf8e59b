"""Dividing a text into spans that each fit an embedder's token window (seed 002, section 2).

A pure module, shared by memory's record nodes and the `window` chunking strategy. `TokenCounter` is
what token-aware code needs from an embedder.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Protocol


class TokenCounter(Protocol):
    """What the token-aware strategies need from an embedder.

    ``window_end_char(text, window)`` is how many leading characters of ``text`` fit in ``window``
    tokens (``len(text)`` when all of it fits); ``token_spans(text)`` gives each token's (start, end)
    character offsets in order. Each method answers None when it cannot count (a remote API without
    a tokenizer, embeddings switched off): unknown is never "fits".
    """

    @property
    def window(self) -> int | None:
        """The model's token window, or None when unknown. A plain attribute satisfies this too."""
        ...

    def count_tokens(self, text: str) -> int | None: ...

    def window_end_char(self, text: str, window: int) -> int | None: ...

    def token_spans(self, text: str) -> list[tuple[int, int]] | None: ...


_BREAK = r"(?:\r\n|\n|\r)"
_CLOSERS = "\"'\u201d\u2019)\\]}\u300d\u300f\uff09\u3011\u3015\u3009\u300b"
# Boundary classes in the order they are tried. Each match's end is where the separator ends.
# Blank lines are matched inside a lookahead so that overlapping runs ("\n\n\n") offer every end.
_BOUNDARY_CLASSES: tuple[re.Pattern[str], ...] = (
    re.compile(rf"(?=({_BREAK}[^\S\r\n]*{_BREAK}))"),  # a blank line: paragraph
    re.compile(_BREAK),  # a line break: line or list item
    # Full-width stops end a sentence anywhere; half-width ones only before whitespace or the end,
    # so "3.14" and "file.txt" are not sentence ends. Closing quotes/brackets stay with the sentence.
    re.compile(rf"[\u3002\uff0e\uff01\uff1f][{_CLOSERS}]*|[.!?][{_CLOSERS}]*(?=\s|\Z)"),
    re.compile(r"\s"),  # any whitespace
)


def divide(text: str, window_end_char: Callable[[str], int | None]) -> list[tuple[int, int]] | None:
    """Divide ``text`` into nodes that each fit an embedder's window (seed 002, section 2).

    ``window_end_char(t)`` answers how many leading characters of ``t`` fit the window: ``len(t)`` when
    all of it fits, None when the embedder cannot tell. Applied to the remaining text until nothing
    remains:

    1. If the remaining text fits, it is the last node.
    2. Otherwise, with ``w`` the answer, cut at the last boundary whose separator ends at or before
       ``w``, trying in order: a blank line, a line break, a sentence end (full-width 。．！？
       anywhere; half-width . ! ? only before whitespace or the end of the text), whitespace.
    3. A cut that would leave the node shorter than ``w / 2`` is not taken; the next class is tried.
    4. With no acceptable boundary, cut at ``w`` itself.

    Cut placement: the cut goes AFTER the separator, and then after any whitespace directly following
    it, as far as ``w`` allows. So a separator (the blank line, the line break, the stop and its
    closing quotes, the space) stays at the end of the node it closes, and the next node starts at
    the first non-whitespace character when the window reaches it. Nodes are not trimmed.

    Returns (start, end) offsets covering ``[0, len(text))`` contiguously, without gap or overlap; text
    that fits (including empty text) is one span ``[(0, len(text))]``. Returns None as soon as the
    callback does: unknown is never "fits". A callback answering 0 or less would never progress, so
    the node is then cut one character long (which is all that can be done; it may not fit).
    Deterministic for a given text and callback.
    """
    spans: list[tuple[int, int]] = []
    position = 0
    length = len(text)
    while True:
        remaining = text[position:]
        answer = window_end_char(remaining)
        if answer is None:
            return None
        if answer >= len(remaining):
            spans.append((position, length))
            return spans
        cut = _cut(remaining, max(answer, 1))
        spans.append((position, position + cut))
        position += cut
        if position == length:  # only after a zero answer's one-character cut took the last character
            return spans


def _cut(remaining: str, window: int) -> int:
    """Where a node of ``remaining`` ends, given that its first ``window`` characters fit."""
    for pattern in _BOUNDARY_CLASSES:
        best = 0
        # endpos one past the window lets a lookahead see the character after a stop at the edge.
        for match in pattern.finditer(remaining, 0, window + 1):
            end = match.end(1) if match.groups() else match.end()
            if end <= window:
                best = max(best, end)
        if not best:
            continue
        while best < window and remaining[best].isspace():
            best += 1
        if 2 * best >= window:
            return best
    return window
