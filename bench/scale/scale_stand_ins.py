"""What the scale bench puts in place of the product's parts it does not time: the embedder (the
questions' precomputed vectors) and bm25s's own token path (ids built as the terms stream past)."""

from __future__ import annotations

import numpy as np
from scale_store import DIMENSIONS


class GivenVectors:
    """Stands in for the embedder: the question's precomputed vector, under the collection's model name."""

    backend = "bench"

    def __init__(self, model: str, vectors: dict[str, np.ndarray]):
        self.model, self.vectors, self.dimensions, self.window = model, vectors, DIMENSIONS, None

    def embed_with_usage(self, texts):
        from ragsite.embedders import Embedded

        return Embedded(np.stack([self.vectors[t] for t in texts]), None)


def token_ids(documents) -> tuple[list[list[int]], dict[str, int]]:
    """bm25s's (ids, vocabulary) form of the documents' terms, built as they stream past.

    What bm25s's own token path would make (each term's id in order of first sight), without holding
    every document's terms as strings first: at a million paragraphs those are ~10^8 string objects.
    """
    vocabulary: dict[str, int] = {}
    ids = [[vocabulary.setdefault(term, len(vocabulary)) for term in document] for document in documents]
    return ids, vocabulary
