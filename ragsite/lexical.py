"""Lexical scoring: the terms of a text and an Okapi BM25 index over paragraphs.

Everything here follows seed 004 ("RAG index", section ``bm25.idx``), which is the
contract another implementation of this format is checked against to 1e-9:

* terms are "the maximal runs of ``[\\p{L}\\p{N}_]`` (Unicode letters, digits, and _, in
  Go RE2 syntax) of the text, lowercased with ``strings.ToLower``";
* ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``;
* a term's contribution is ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))``,
  with k1 = 1.2 and b = 0.75 (the ``bm25`` block of the seed's ``meta.json``).

The module is pure (no Django models, no settings) so it is tested without a database.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from collections.abc import Iterable, Sequence
from functools import cache
from itertools import chain

import numpy as np

DEFAULT_K1 = 1.2
DEFAULT_B = 0.75

# Go RE2's \p{L} is the union of the five letter categories and \p{N} of the three number
# categories. Python's own `\w` is defined another way (str.isalnum: "alphabetic" or having
# a numeric value, plus "_"). On CPython 3.11 the two pick the same code points, and `\w`
# is much faster, so it is used only after every code point has been checked to agree;
# otherwise the class is spelled out from the categories.
TERM_CATEGORIES = frozenset({"Lu", "Ll", "Lt", "Lm", "Lo", "Nd", "Nl", "No"})

# Simple (one-to-one) lowercase mappings, from field 13 of UnicodeData.txt, for the runes
# whose *full* lowercase (SpecialCasing.txt, which Python's str.lower applies) is more than
# one code point. Go's unicode.ToLower only knows the simple mapping, so "İ" is "i", where
# Python gives "i" + U+0307 COMBINING DOT ABOVE. In Unicode 14 (Python 3.11) U+0130 is the
# only such rune; tests/collections/test_lexical.py fails if a newer Python adds another.
SIMPLE_LOWER_EXCEPTIONS = {"\u0130": "i"}
_ASCII_TERM = re.compile(r"[a-z0-9_]+")


# What `_computed_tables` finds, by (Python implementation, minor version, Unicode database), for
# the Pythons it was checked on: `\w` is the class, and the rewrites. The pass over every code point
# cost 0.5-1.4 s on a loaded machine, and a new node's first search waited for it (decisions/0094);
# tests/shared/test_lexical.py computes it again on the Python that runs them and fails on a mismatch.
KNOWN_TABLES = {("cpython", (3, 11), "14.0.0"): (r"\w+", (("\u03a3", "\u03c3"), ("\u0130", "i")))}


@cache
def _tables() -> tuple[re.Pattern[str], tuple[tuple[str, str], ...]]:
    """The compiled ``[\\p{L}\\p{N}_]+`` of seed 004, and the rewrites :func:`go_lower` needs: known
    for this Python (`KNOWN_TABLES`), else computed (`_computed_tables`), once per process."""
    known = KNOWN_TABLES.get((sys.implementation.name, sys.version_info[:2], unicodedata.unidata_version))
    if known is not None:
        return re.compile(known[0]), known[1]
    return _computed_tables()


def _computed_tables() -> tuple[re.Pattern[str], tuple[tuple[str, str], ...]]:
    """`_tables` from Python's Unicode database: one pass over every code point (0.5-1.4 s).

    The rewrites are the runes whose Python ``lower()`` is not one rune, each paired with its
    simple lowercase where ``SIMPLE_LOWER_EXCEPTIONS`` records one; a rune missing from it
    (only possible on a newer Unicode than this was written against) is left unchanged rather
    than given a guessed mapping. "Σ" → "σ" is added: see :func:`go_lower`.
    """
    ranges: list[tuple[int, int]] = []
    rewrites: list[tuple[str, str]] = [("\u03a3", "\u03c3")]
    word_is_exact = True
    for cp in range(sys.maxunicode + 1):
        ch = chr(cp)
        in_class = cp == 0x5F or unicodedata.category(ch) in TERM_CATEGORIES
        if in_class:
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
        # sre's \w is exactly "isalnum() or _" (SRE_UNI_IS_WORD).
        if in_class != (ch == "_" or ch.isalnum()):
            word_is_exact = False
        if len(ch.lower()) != 1:
            rewrites.append((ch, SIMPLE_LOWER_EXCEPTIONS.get(ch, ch)))
    if word_is_exact:
        # Same code points, and about seven times faster: sre tests a class with code points
        # beyond the BMP by walking its astral ranges one by one for every non-term character.
        return re.compile(r"\w+"), tuple(rewrites)
    # \U escapes keep the pattern plain ASCII whatever characters it covers.
    parts = [f"\\U{lo:08x}" if lo == hi else f"\\U{lo:08x}-\\U{hi:08x}" for lo, hi in ranges]
    return re.compile("[" + "".join(parts) + "]+"), tuple(rewrites)


def go_lower(text: str) -> str:
    """Lowercase ``text`` the way Go's ``strings.ToLower`` does: ``unicode.ToLower`` per rune.

    That is the simple case mapping of each code point on its own, which differs from
    Python's ``str.lower`` in exactly two ways:

    * no context: Go has no Final_Sigma rule, so "Σ" is always "σ", never "ς" at a word's end
      (an "ς" already in the text stays "ς", since it is lowercase);
    * no expansion: a rune whose full lowercase is several code points (only "İ", U+0130,
      in Unicode 14) gets its one-rune simple mapping instead ("i", not "i" + U+0307).

    Every other rune's Python ``lower()`` is already its simple mapping (SpecialCasing.txt
    lists no other unconditional lowercase, and its language-specific rules are applied by
    neither language), so those few runes are rewritten first and the rest is left to the
    fast built-in. Rewriting "Σ" to "σ" beforehand removes the only context-sensitive rule
    ``lower()`` applies.
    """
    if text.isascii():
        return text.lower()
    for source, target in _tables()[1]:
        if source in text:
            text = text.replace(source, target)
    return text.lower()


def terms(text: str) -> list[str]:
    """The terms of ``text`` as seed 004 defines them, in order, repeats kept.

    Maximal runs of Unicode letters (Lu Ll Lt Lm Lo), numbers (Nd Nl No) and "_", each
    lowercased by :func:`go_lower`. Combining marks (Mn, Mc) are not letters, so "é" written
    as "e" + U+0301 splits a word in two, exactly as the Go reference does.

    Lowercasing before matching gives the same runs as matching first: the simple lowercase
    of a rune never moves it into or out of the class (checked over every code point in the
    tests), so the order is free and lowering the whole text once is the fast one.

    Note: the class is as current as Python's Unicode database (14.0 on Python 3.11); a
    character assigned in a later Unicode version than Python knows is not a letter here.
    """
    if text.isascii():  # of ASCII, the class holds the letters, the digits and "_"
        return _ASCII_TERM.findall(text.lower())
    return _tables()[0].findall(go_lower(text))


def word_is_term_class() -> bool:
    """Whether sre's ``\\w`` picks exactly seed 004's term characters on this Python (see `_tables`), so
    that ``\\w`` may stand for the class in other patterns (index.byte_terms)."""
    return _tables()[0].pattern == r"\w+"


class BM25Index:
    """Okapi BM25 over a fixed list of documents (paragraphs), scored with numpy.

    The layout mirrors seed 004's ``bm25.idx`` so that writing one later is a straight walk:

    * ``n_docs``, ``doc_len`` (terms per document, int32; ``u32`` in the file) and ``avgdl``
      (the mean of ``doc_len`` as a float64);
    * ``vocabulary``: the distinct terms sorted by their UTF-8 bytes (for ``str`` this is code
      point order, which UTF-8 preserves), a term's id being its position;
    * ``df[t]``: documents containing term ``t``;
    * postings in CSR form: documents of term ``t`` are ``postings_doc[indptr[t]:indptr[t+1]]``
      in increasing order (so the file's doc gaps are non-negative, the first being the
      document number itself) with their term frequencies in ``postings_tf``.

    Repeated query terms count with their multiplicity: "cell cell" scores twice what "cell"
    does. That is the Robertson–Walker query-term weight ``(k3 + 1) qtf / (k3 + qtf)`` in its
    usual limit k3 → ∞ (Robertson et al., "Okapi at TREC-3", 1994), and what Lucene (one
    clause per query token), Anserini's bag-of-words queries and rank_bm25 do. Seed 004 gives
    only the per-term formula; summing it over the question's terms as they come, repeats
    included, is the plainest way to apply it (deduplicating is an extra step nothing there
    asks for), and a question that repeats a content word is usually stressing it.
    :meth:`upper_bound` counts the same way, so scores divided by it stay within [0, 1).
    """

    def __init__(
        self,
        *,
        vocabulary: Sequence[str],
        doc_len: np.ndarray,
        indptr: np.ndarray,
        postings_doc: np.ndarray,
        postings_tf: np.ndarray,
        k1: float = DEFAULT_K1,
        b: float = DEFAULT_B,
    ) -> None:
        """Take already-built arrays (the shape a reader of ``bm25.idx`` would produce).

        Use :meth:`from_terms` or :meth:`from_texts` to build from documents.
        """
        self.k1 = float(k1)
        self.b = float(b)
        self.vocabulary: tuple[str, ...] = tuple(vocabulary)
        self.term_ids: dict[str, int] = {term: i for i, term in enumerate(self.vocabulary)}
        self.doc_len = np.asarray(doc_len, dtype=np.int32)
        self.n_docs = int(self.doc_len.shape[0])
        # Summed as Python ints and divided once: exact up to the final rounding.
        self.avgdl = int(self.doc_len.sum(dtype=np.int64)) / self.n_docs if self.n_docs else 0.0
        self.indptr = np.asarray(indptr, dtype=np.int64)
        self.postings_doc = np.asarray(postings_doc, dtype=np.int32)
        self.postings_tf = np.asarray(postings_tf, dtype=np.int32)
        if self.indptr.shape[0] != len(self.vocabulary) + 1:
            raise ValueError("indptr must have one entry per term plus one")
        self.df = np.diff(self.indptr).astype(np.int32)
        self.idf = idf(self.n_docs, self.df)
        self._weights = self._posting_weights()

    @classmethod
    def from_texts(cls, texts: Iterable[str], *, k1: float = DEFAULT_K1, b: float = DEFAULT_B) -> BM25Index:
        """Index each text's :func:`terms`; document ``i`` is the ``i``-th text."""
        return cls.from_terms((terms(text) for text in texts), k1=k1, b=b)

    @classmethod
    def from_terms(
        cls, documents: Iterable[Sequence[str]], *, k1: float = DEFAULT_K1, b: float = DEFAULT_B
    ) -> BM25Index:
        """Index documents given as term lists; document ``i`` is the ``i``-th list."""
        term_lists = [document if isinstance(document, list) else list(document) for document in documents]
        n_docs = len(term_lists)
        doc_len = np.fromiter(map(len, term_lists), dtype=np.int32, count=n_docs)
        tokens_in_order = list(chain.from_iterable(term_lists))
        vocabulary = sorted(set(tokens_in_order))
        term_ids = dict(zip(vocabulary, range(len(vocabulary)), strict=True))
        # map() over the dict's own lookup stays in C; a Python-level loop over every token
        # was most of the build time.
        tokens = np.fromiter(
            map(term_ids.__getitem__, tokens_in_order), dtype=np.int64, count=len(tokens_in_order)
        )
        docs = np.repeat(np.arange(n_docs, dtype=np.int64), doc_len)
        # One sort over (term, document) keys both groups the postings by term and orders the
        # documents within each term; the run lengths are the term frequencies.
        stride = max(n_docs, 1)
        keys, tf = np.unique(tokens * stride + docs, return_counts=True)
        posting_terms = keys // stride
        indptr = np.zeros(len(vocabulary) + 1, dtype=np.int64)
        np.cumsum(np.bincount(posting_terms, minlength=len(vocabulary)), out=indptr[1:])
        return cls(
            vocabulary=vocabulary,
            doc_len=doc_len,
            indptr=indptr,
            postings_doc=keys % stride,
            postings_tf=tf,
            k1=k1,
            b=b,
        )

    def _posting_weights(self) -> np.ndarray:
        """``tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))`` for every posting.

        Everything in the seed's formula except idf depends only on (term, document), so it
        is computed once here and a query costs one multiply-add per posting it touches.
        Evaluated in the seed's own order of operations to stay within rounding of it.
        """
        if self.postings_tf.size == 0:
            return np.zeros(0, dtype=np.float64)
        tf = self.postings_tf.astype(np.float64)
        dl = self.doc_len[self.postings_doc].astype(np.float64)
        # avgdl > 0 whenever there is a posting (some document has a term).
        return tf * (self.k1 + 1) / (tf + self.k1 * (1 - self.b + self.b * dl / self.avgdl))

    def _query_counts(self, query_terms: Iterable[str]) -> tuple[np.ndarray, np.ndarray]:
        """Ids of the query's terms that are in the vocabulary, ascending, with multiplicities."""
        ids = [self.term_ids[term] for term in query_terms if term in self.term_ids]
        if not ids:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        return np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)

    def scores(self, query_terms: Iterable[str]) -> np.ndarray:
        """BM25 score of every document for the question's terms (float64, length ``n_docs``).

        ``sum over query terms q of idf(q) * weight(q, d)``, repeats counted (see the class
        docstring); a term not in the vocabulary adds nothing. Pass ``terms(question)``.
        """
        result = np.zeros(self.n_docs, dtype=np.float64)
        ids, counts = self._query_counts(query_terms)
        for term_id, count in zip(ids.tolist(), counts.tolist(), strict=True):
            lo, hi = self.indptr[term_id], self.indptr[term_id + 1]
            # A term's postings name each document once, so plain fancy-index += is safe.
            result[self.postings_doc[lo:hi]] += (count * self.idf[term_id]) * self._weights[lo:hi]
        return result

    def upper_bound(self, query_terms: Iterable[str]) -> float:
        """What a document holding every question term would approach: ``sum idf(q) * (k1 + 1)``.

        The per-term weight ``tf (k1 + 1) / (tf + K)`` rises towards ``k1 + 1`` as tf grows and
        never reaches it, so no document scores this much; it is the per-question scale
        DESIGN.md §5 divides BM25 by to put it on an absolute [0, 1]. Counted with the same
        multiplicity as :meth:`scores`, over *all* the question's terms: a term no paragraph
        contains weighs in at the idf of df = 0, the rarest a term can be. So a question whose
        only match is a common word ("recipe for sourdough" against a handbook, matching "for")
        stays near 0 instead of scoring as if "for" were the whole question.
        """
        question = list(query_terms)
        ids, counts = self._query_counts(question)
        total = 0.0
        for term_id, count in zip(ids.tolist(), counts.tolist(), strict=True):
            total += count * float(self.idf[term_id])
        unknown = sum(1 for term in question if term not in self.term_ids)
        if unknown:
            total += unknown * float(idf(self.n_docs, np.zeros(1))[0])
        return total * (self.k1 + 1)

    def scored_as(self, collection: BM25Index) -> BM25Index:
        """These documents scored with `collection`'s statistics: its idf, avgdl, k1 and b.

        For parts of a collection's documents (a long memory's nodes): each part scores as a
        document of that collection would, so a part and a whole document compare on one scale
        and the collection's own scores do not move. A term the collection lacks weighs nothing.
        """
        known = np.fromiter(
            (collection.term_ids.get(term, -1) for term in self.vocabulary), np.int64, self.n_terms
        )
        scored = BM25Index(
            vocabulary=self.vocabulary,
            doc_len=self.doc_len,
            indptr=self.indptr,
            postings_doc=self.postings_doc,
            postings_tf=self.postings_tf,
            k1=collection.k1,
            b=collection.b,
        )
        if collection.n_terms == 0:  # nothing in the collection to weigh: every part scores 0
            scored.idf = np.zeros(self.n_terms)
        else:
            scored.avgdl = collection.avgdl
            scored.idf = np.where(known >= 0, collection.idf[np.maximum(known, 0)], 0.0)
        scored._weights = scored._posting_weights()
        return scored

    @property
    def n_terms(self) -> int:
        """How many distinct terms the index holds."""
        return len(self.vocabulary)


def idf(n_docs: int, df: np.ndarray) -> np.ndarray:
    """Seed 004's idf, ``ln(1 + (N - df + 0.5) / (df + 0.5))``, element-wise.

    The "+1 inside the log" form (as in Lucene's BM25Similarity) is always positive, unlike
    Robertson–Spärck Jones' ``ln((N - df + 0.5) / (df + 0.5))``, which goes negative for terms
    in more than half the documents.
    """
    df = np.asarray(df, dtype=np.float64)
    # log(1 + x) as written rather than log1p(x): the seed's reference computes it that way.
    return np.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


__all__ = ["BM25Index", "DEFAULT_B", "DEFAULT_K1", "go_lower", "idf", "terms", "word_is_term_class"]
