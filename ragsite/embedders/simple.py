"""Two backends with no model: `none` (lexical only) and `hash` (deterministic, for tests and offline
demos)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from .base import Embedded, Embedder, EmbeddingError, check_texts, check_window, normalise_rows, window_cut

# --------------------------------------------------------------------------------------------------
# none


class NoneEmbedder(Embedder):
    """The lexical-only backend: no vectors, no token counts."""

    backend = "none"
    model = "lexical"
    dimensions = 0
    window = None

    def embed_with_usage(self, texts: Sequence[str]) -> Embedded:
        """Always an error: a lexical-only deployment has no embedding model."""
        raise EmbeddingError("the 'none' embedding backend is lexical only and cannot embed text")


# --------------------------------------------------------------------------------------------------
# hash


# Terms as the lexical scorer sees them: maximal runs of Unicode letters, digits and "_".
_TERM = re.compile(r"\w+")
_WORD = re.compile(r"\S+")


@lru_cache(maxsize=65536)
def _hashed_feature(term: str, dimensions: int) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")
    # The lowest bit picks the sign so that colliding terms cancel on average instead of piling up.
    return (digest >> 1) % dimensions, 1.0 if digest & 1 else -1.0


class HashEmbedder(Embedder):
    """A deterministic testing backend: signed feature hashing of lowercased word terms.

    Texts that share words get similar vectors; nothing else is modelled. Tokens are
    whitespace-separated words plus the two special tokens a BERT model would add, and the window
    is 256 of those, so code that divides text against a token window can be tested without a model.
    """

    backend = "hash"

    def __init__(self, dimensions: int = 64, window: int = 256) -> None:
        self.model = f"hash-{dimensions}"
        self.dimensions = dimensions
        self.window = window

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dimensions, dtype=np.float32)
        for term in _TERM.findall(text.lower()):
            index, sign = _hashed_feature(term, self.dimensions)
            vector[index] += sign
        if not vector.any():
            # No terms (or perfect cancellation): a fixed unit vector keeps every row unit-length.
            vector[0] = 1.0
        return vector

    def embed_with_usage(self, texts: Sequence[str]) -> Embedded:
        """Hashed vectors; tokens are the word counts (with special tokens) of all texts."""
        check_texts(texts)
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row] = self._vector(text)
        return Embedded(normalise_rows(vectors), sum(self.count_tokens(text) for text in texts))

    def count_tokens(self, text: str) -> int:
        """Whitespace-separated words plus 2."""
        return len(text.split()) + 2

    def token_ids(self, text: str) -> list[int]:
        """[CLS], each word's hashed feature index, [SEP] — as ids, so a tokenizer endpoint can serve them."""
        words = [_hashed_feature(word.lower(), self.dimensions)[0] + 2 for word in text.split()]
        return [0, *words, 1]

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """The (start, end) of each whitespace-separated word."""
        return [match.span() for match in _WORD.finditer(text)]

    def window_end_char(self, text: str, window: int) -> int:
        """The start of the first word past the window, or `len(text)` when all words fit."""
        check_window(window)
        starts = [start for start, _ in self.token_spans(text)]
        return window_cut(starts, len(text), window, lambda cut: self.count_tokens(text[:cut]))
