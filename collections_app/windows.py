"""The windows a paragraph is embedded as: pieces the model sees whole, overlapping.

A paragraph longer than the embedding model's token window would lose its tail to the model's
truncation, so it is embedded as several windows (stored as extra vectors of the same paragraph,
see vector_codec, and scored by the best one, see mapped_index).

Pure: works with any embedder exposing `window` and `window_end_char` (ragsite.embedders).
"""

from __future__ import annotations

import numpy as np

from .vector_codec import encode

# At most this many windows a paragraph: a paragraph far longer than the model's window (a
# `fixed` chunk of 100,000 characters, say) is embedded over its first MAX_WINDOWS windows only.
MAX_WINDOWS = 16
# Consecutive windows share a quarter of the model's window, so a sentence cut by one window's end
# is whole in the next.
WINDOW_OVERLAP = 0.25


def model_windows(text: str, embedder) -> list[str]:
    """`text` as the overlapping pieces the model sees whole: one piece when it fits the window.

    Cut with the embedder's own `window_end_char`, so each piece holds at most `window` tokens
    (special tokens included); the next piece starts (1 - WINDOW_OVERLAP) of a window later.
    A backend that cannot count tokens embeds the text as one piece (the model truncates it).
    """
    window = getattr(embedder, "window", None)
    if not window or window < 4:
        return [text]
    stride = max(3, int((window - 2) * (1 - WINDOW_OVERLAP)) + 2)
    pieces: list[str] = []
    start = 0
    while len(pieces) < MAX_WINDOWS:
        rest = text[start:]
        end = embedder.window_end_char(rest, window)
        if end is None:
            return [text]
        pieces.append(rest[:end])
        if end >= len(rest):
            break
        step = embedder.window_end_char(rest, stride) or 0
        start += max(step, 1)
        while start < len(text) and text[start].isspace():
            start += 1
        if start >= len(text):
            break
    return pieces


def embed_in_windows(texts: list[str], embedder) -> tuple[list[bytes], int | None]:
    """Each text's windows embedded in one call: the stored blob of each text, and the tokens used."""
    windows = [model_windows(text, embedder) for text in texts]
    embedded = embedder.embed_with_usage([piece for pieces in windows for piece in pieces])
    vectors = np.asarray(embedded.vectors, dtype=np.float32)
    blobs, at = [], 0
    for pieces in windows:
        blobs.append(encode(vectors[at : at + len(pieces)]))
        at += len(pieces)
    return blobs, embedded.tokens


__all__ = ["MAX_WINDOWS", "WINDOW_OVERLAP", "embed_in_windows", "model_windows"]
