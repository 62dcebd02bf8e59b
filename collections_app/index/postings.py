"""A block of rows' terms as postings with block-local term ids: the tokenizing half of writing an index,
which needs nothing but the texts, so other processes can do it while the writer merges
(docs/decisions/0051).

Pure: numpy and the lexical module only; no models, no settings, no database.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain, count
from typing import NamedTuple

import numpy as np

from ragsite.analyzers import SIMPLE, Analyzer, analyzer
from ragsite.lexical import terms

from ..text.stitch import carried_terms_text
from .byte_terms import text_postings


class BlockPostings(NamedTuple):
    """One block's postings: ``vocabulary[term[i]]`` occurs ``tf[i]`` times in the block's row ``doc[i]``,
    sorted by (term, doc); ``lengths`` is each row's number of terms. Term ids are the block's own
    (`IndexWriter.add_postings` maps them onto its vocabulary; the files it writes sort the terms, so
    their order here changes nothing written): in order of first sight from `block_postings`, in
    another order from `byte_terms.text_postings`."""

    vocabulary: list[str]
    term: np.ndarray  # int64
    doc: np.ndarray  # int32, the row within the block
    tf: np.ndarray  # int32
    lengths: np.ndarray  # int64


def block_postings(term_lists: Sequence[Sequence[str]]) -> BlockPostings:
    """The postings of rows whose terms are ``term_lists``."""
    rows = len(term_lists)
    lengths = np.fromiter(map(len, term_lists), dtype=np.int64, count=rows)
    total = int(lengths.sum())
    if not total:
        empty = np.zeros(0, dtype=np.int32)
        return BlockPostings([], np.zeros(0, dtype=np.int64), empty, empty, lengths)
    # One pass of dict look-ups in C: each term's id is the position of its first sighting (setdefault
    # keeps the first), made dense afterwards. Two passes (dict.fromkeys, then a look-up a term) cost
    # ~15 % more; the hashing of ~230 terms a paragraph is most of a block's time.
    seen: dict[str, int] = {}
    sparse = np.fromiter(map(seen.setdefault, chain.from_iterable(term_lists), count()), np.int64, total)
    first = np.fromiter(seen.values(), dtype=np.int64, count=len(seen))
    dense = np.empty(total, dtype=np.int64)
    dense[first] = np.arange(first.size, dtype=np.int64)
    docs = np.repeat(np.arange(rows, dtype=np.int64), lengths)
    keys, tf = np.unique(dense[sparse] * rows + docs, return_counts=True)
    doc = (keys % rows).astype(np.int32)
    return BlockPostings(list(seen), keys // rows, doc, tf.astype(np.int32), lengths)


def analyzed(postings: BlockPostings, under: Analyzer) -> BlockPostings:
    """Seed-004 postings as analyzer ``under`` indexes the same rows: each distinct term replaced by its
    `Analyzer.expand` terms, a row's frequencies of terms that become one summed, and each row's length
    counted in the analyzer's terms: the postings `block_postings` makes of ``[under.terms(t) for t in
    texts]`` (terms numbered otherwise; tests/collections/test_analyzers.py), each distinct term analyzed
    once."""
    if under.is_simple or not postings.vocabulary:
        return postings
    expansions = under.expansions(postings.vocabulary)
    counts = np.fromiter(map(len, expansions), dtype=np.int64, count=len(expansions))
    seen: dict[str, int] = {}
    flat = np.fromiter(
        map(seen.setdefault, chain.from_iterable(expansions), count()), np.int64, int(counts.sum())
    )
    # Ids made dense in order of first sight, as block_postings numbers them.
    first = np.fromiter(seen.values(), dtype=np.int64, count=len(seen))
    dense = np.empty(flat.size, dtype=np.int64)
    dense[first] = np.arange(first.size, dtype=np.int64)
    new_ids = dense[flat]
    starts = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=starts[1:])
    # Every posting repeated once per term its old term expands to, each copy taking one of them.
    per_posting = counts[postings.term]
    source = np.repeat(np.arange(postings.term.size, dtype=np.int64), per_posting)
    first_copy = np.repeat(np.cumsum(per_posting) - per_posting, per_posting)
    within = np.arange(source.size, dtype=np.int64) - first_copy
    term = new_ids[starts[postings.term[source]] + within]
    rows = max(int(postings.lengths.size), 1)
    keys, inverse = np.unique(term * rows + postings.doc[source], return_inverse=True)
    tf = np.bincount(inverse, weights=postings.tf[source], minlength=keys.size).astype(np.int32)
    lengths = np.bincount(
        postings.doc, weights=postings.tf * per_posting, minlength=postings.lengths.size
    ).astype(np.int64)
    return BlockPostings(list(seen), keys // rows, (keys % rows).astype(np.int32), tf, lengths)


def row_postings(
    texts: Sequence[str], contexts: Sequence[str | None], carried: Sequence[int], analyzer_name: str = SIMPLE
) -> tuple[BlockPostings, BlockPostings, BlockPostings]:
    """A block of rows' three lexical fields: their texts, their contexts, and their carried openings
    (the first ``carried[i]`` characters of text i, `stitch.carried_terms_text`), under the build's
    analyzer (`ragsite.analyzers`; a name, so a spawned tokenizing process can be handed it).

    The postings `block_postings` makes of their `lexical.terms`, found on the texts' bytes
    (`byte_terms.text_postings`: a few times faster), then `analyzed`."""
    under = analyzer(analyzer_name)
    openings = [carried_terms_text(text, n) for text, n in zip(texts, carried, strict=True)]
    return (
        analyzed(BlockPostings(*text_postings(texts)), under),
        analyzed(BlockPostings(*text_postings([context or "" for context in contexts])), under),
        analyzed(BlockPostings(*text_postings(openings)), under),
    )


def row_postings_of_terms(
    texts: Sequence[str], contexts: Sequence[str | None], carried: Sequence[int]
) -> tuple[BlockPostings, BlockPostings, BlockPostings]:
    """`row_postings` term by term in Python (`lexical.terms`, then `block_postings`): what it was before
    `byte_terms`, kept as the reference the tests compare it with."""
    openings = [carried_terms_text(text, n) for text, n in zip(texts, carried, strict=True)]
    return (
        block_postings([terms(text) for text in texts]),
        block_postings([terms(context or "") for context in contexts]),
        block_postings([terms(opening) for opening in openings]),
    )


__all__ = ["BlockPostings", "analyzed", "block_postings", "row_postings", "row_postings_of_terms"]
