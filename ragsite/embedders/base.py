"""The embedder interface and the small helpers every backend shares."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

BACKENDS = ("local", "http", "none", "hash")

# The bundled model's name, should its model card be missing: its folder inside the package is just
# "model", which names nothing.
DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"


class EmbeddingError(Exception):
    """A backend failed to embed or count; the message says what went wrong and never names a path."""


@dataclass(frozen=True)
class Embedded:
    """The result of one embedding call."""

    vectors: np.ndarray  # float32, shape (n, dimensions), each row of unit length
    tokens: int | None  # input tokens used, for the ledger; None when the backend did not say


class Embedder:
    """What every backend offers. Subclasses set the four attributes and override the methods."""

    backend: str = ""
    model: str = ""
    dimensions: int = 0
    window: int | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in the order given."""
        return self.embed_with_usage(texts).vectors

    def embed_with_usage(self, texts: Sequence[str]) -> Embedded:
        """The vectors of `texts` together with the input tokens the backend used."""
        raise NotImplementedError

    def count_tokens(self, text: str) -> int | None:
        """Model tokens of the whole text, special tokens included, untruncated; None if unknown."""
        return None

    def window_end_char(self, text: str, window: int) -> int | None:
        """Where a window of `window` tokens (special tokens included) closes on `text`.

        `len(text)` when the whole text fits; otherwise an offset `k` such that
        `count_tokens(text[:k]) <= window`. None when the backend cannot count.
        """
        return None

    def token_spans(self, text: str) -> list[tuple[int, int]] | None:
        """Character (start, end) of every token of `text`, special tokens excluded; None if unknown."""
        return None

    def token_ids(self, text: str) -> list[int] | None:
        """The ids the model sees for the whole text, special tokens included, untruncated; None if unknown.

        Served by ragsite's own `/v1/tokenize`, so another installation can count against this model.
        """
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} backend={self.backend!r} model={self.model!r}>"


def check_texts(texts: Sequence[str]) -> None:
    # A bare string is a Sequence[str] too, and would be embedded one character at a time.
    if isinstance(texts, str):
        raise TypeError("embed takes a sequence of texts, not one string")


def check_window(window: int) -> None:
    # Two tokens ([CLS] and [SEP]) are always spent, so a smaller window can hold nothing at all.
    if window < 2:
        raise ValueError("a token window must hold at least the 2 special tokens")


def normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """Scale each row to unit length in place; an all-zero row cannot be, and is an error."""
    norms = np.linalg.norm(vectors, axis=1)
    if vectors.shape[0] and not np.all(norms > 0):
        raise EmbeddingError("the embedder returned an all-zero vector, which has no direction")
    vectors /= norms[:, None]
    return vectors


def window_cut(starts: Sequence[int], text_length: int, window: int, count: Any) -> int:
    """The window end over content tokens starting at `starts` (special tokens not among them).

    With two special tokens, `window - 2` content tokens fit. The cut goes to the start of the first
    token that does not fit rather than to the end of the last one that does: whatever lies between
    (whitespace, characters the tokenizer drops) costs no token, and keeping it lets a caller cut at
    the whitespace after the last whole word. A cut inside a word can tokenise the truncated word
    differently (a word the model reads as one [UNK] may split into pieces once shortened), so the
    prefix is recounted with `count` and the cut steps back a token at a time until it fits.
    """
    fitting = window - 2
    if len(starts) <= fitting:
        return text_length
    index = fitting
    while index > 0:
        cut = starts[index]
        if count(cut) <= window:
            return cut
        index -= 1
    return starts[0] if starts else 0
