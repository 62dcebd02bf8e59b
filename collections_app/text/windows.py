"""The windows a paragraph is embedded as: pieces the model sees whole, overlapping.

A paragraph longer than the embedding model's token window would lose its tail to the model's
truncation, so it is embedded as several windows (stored as extra vectors of the same paragraph,
see vector_codec) and scored by its first window plus a share of what its best later window adds
(`lean_to_first`, used by mapped_index and measure).

Pure: works with any embedder exposing `window` and `window_end_char` (ragsite.embedders).
"""

from __future__ import annotations

import numpy as np

from ..index.vector_codec import encode

# At most this many windows a paragraph: a paragraph far longer than the model's window (a
# `fixed` chunk of 100,000 characters, say) is embedded over its first MAX_WINDOWS windows only.
MAX_WINDOWS = 16
# Consecutive windows share a quarter of the model's window, so a sentence cut by one window's end
# is whole in the next.
WINDOW_OVERLAP = 0.25
# The share of what a paragraph's best later window adds over its first that counts in the
# paragraph's cosine: 1 would score the best window, 0 the first alone. The best of several cosines
# is biased upwards for a long paragraph (more draws), while the first window holds its title and
# opening; 0.75 was chosen on SciFact train among 0, 0.25, 0.5, 0.6, 0.75, 0.9 and 1 with the
# fusion and context weights swept beside it (docs/decisions/0037).
LATER_WINDOW_SHARE = 0.75


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


def lean_to_first(first: np.ndarray, best: np.ndarray, share: float | None = None) -> np.ndarray:
    """Each paragraph's cosine from its first window's and its best window's (the first included):
    ``first + share * (best - first)``, in float32 as the scores are.

    ``best >= first``, so the result lies between them: a one-window paragraph (``best == first``)
    keeps its cosine, and no rule moves a paragraph past what its best window says. ``share`` None is
    `LATER_WINDOW_SHARE`; share 1 returns ``best`` exactly (``first + (best - first)`` can differ by an
    ulp in float32).
    """
    share = LATER_WINDOW_SHARE if share is None else share
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"the later windows' share must be within [0, 1], got {share}")
    first = np.asarray(first, dtype=np.float32)
    best = np.asarray(best, dtype=np.float32)
    if share == 1.0:
        return best.copy()
    return (first + np.float32(share) * (best - first)).astype(np.float32)


def pool_windows(per_vector: np.ndarray, starts: np.ndarray, share: float | None = None) -> np.ndarray:
    """One cosine per paragraph from the cosines of its windows, `lean_to_first`.

    ``per_vector`` holds every window's cosine, a paragraph's windows consecutive, and ``starts``
    (ascending, ``starts[0] == 0``) the position of each paragraph's first window.
    """
    per_vector = np.asarray(per_vector, dtype=np.float32)
    starts = np.asarray(starts, dtype=np.int64)
    if starts.size == 0:
        return np.zeros(0, dtype=np.float32)
    return lean_to_first(per_vector[starts], np.maximum.reduceat(per_vector, starts), share)


__all__ = [
    "LATER_WINDOW_SHARE",
    "MAX_WINDOWS",
    "WINDOW_OVERLAP",
    "embed_in_windows",
    "lean_to_first",
    "model_windows",
    "pool_windows",
]
