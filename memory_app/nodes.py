"""Dividing one record's text into nodes against an embedder's token window (seed 002 §2).

Pure: no models, no settings. The cutting rule itself is `collections_app.text.chunking.divide`; this
module decides whether a record is divided at all and counts each node's own tokens.

* A record "runs past the window" when its whole text counts more tokens than the window.
* A record that fits has no nodes: the record itself is its only span.
* An embedder that cannot count (no window, or `count_tokens` / `window_end_char` answering
  None) gives no nodes, and the answer says the length is unknown: unknown is never "fits".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ragsite.division import TokenCounter, divide

UNKNOWN: Literal["unknown"] = "unknown"
FITS: Literal["fits"] = "fits"
DIVIDED: Literal["divided"] = "divided"


# Passages: each node is divided again, by the same rule, against this many tokens (about one
# sentence). A node's single vector dilutes a one-sentence fact among a window of other prose; the
# passage's vector does not. 32 chosen on bench/memory/memory_recall.py's development facts (30 of 30 at
# 32 and 48, 29 at 64, 28 at 96, 23 with nodes alone); docs/decisions/0026 has the held-out figures.
PASSAGE_WINDOW = 32


@dataclass(frozen=True)
class NodeSpan:
    """One node: `text[start:end]`, its own token count, and its passages' (start, end) in `text`."""

    index: int
    start: int
    end: int
    token_count: int
    passages: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Division:
    """How a record divides: `unknown`, `fits` (no nodes), or `divided` (two or more spans)."""

    status: Literal["unknown", "fits", "divided"]
    window: int | None = None
    tokens: int | None = None  # the whole text's tokens, when known
    spans: list[NodeSpan] = field(default_factory=list)


def runs_past_window(tokens: int | None, window: int | None) -> bool:
    """True only when both are known and the text needs more tokens than the window holds."""
    return tokens is not None and bool(window) and tokens > window


def divide_record(text: str, embedder: TokenCounter) -> Division:
    """Divide `text` by seed 002's rule against `embedder.window`, measuring each node on its own span."""
    window = embedder.window
    if not window:
        return Division(UNKNOWN)
    tokens = embedder.count_tokens(text)
    if tokens is None:
        return Division(UNKNOWN, window)
    if not runs_past_window(tokens, window):
        return Division(FITS, window, tokens)
    cuts = divide(text, lambda remaining: embedder.window_end_char(remaining, window))
    if cuts is None:
        return Division(UNKNOWN, window, tokens)
    spans = []
    for index, (start, end) in enumerate(cuts):
        # Counted on the span itself, as it will be embedded: invariant 3 is about this number.
        count = embedder.count_tokens(text[start:end])
        passages = divide(
            text[start:end], lambda remaining: embedder.window_end_char(remaining, PASSAGE_WINDOW)
        )
        if count is None or passages is None:
            return Division(UNKNOWN, window, tokens)
        spans.append(NodeSpan(index, start, end, count, tuple((start + a, start + b) for a, b in passages)))
    return Division(DIVIDED, window, tokens, spans)
