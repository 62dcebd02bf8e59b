"""A block of texts' postings found on their bytes with numpy rather than term by term in Python (issue
29, item 5): the same postings as ``postings.block_postings([terms(t) for t in texts])``, a few times
faster.

How: the block's texts, lowercased (Go's ``strings.ToLower``, `lexical.go_lower`), are joined into one
UTF-8 buffer with a space between rows; in a text that is not ASCII, every non-ASCII character outside
seed 004's term class is first replaced by a space. A term is then exactly a maximal run of word bytes:
``[a-z0-9_]`` (what the class holds of ASCII, once lowered) or any byte ≥ 0x80 (a UTF-8 sequence never
holds an ASCII byte, and the non-ASCII characters left are all term characters).

Each run gets an exact key, never a hash. A run of ASCII bytes is a string of 6-bit codes (1 to 37, 0
past its end): up to 8 bytes, 48 bits, which leave room for the row in one int64, so one sort orders
the postings by (term, row) and counts them; 9 to 16 bytes, two 48-bit halves, each numbered among the
block's distinct halves, the pair of numbers being exact. The rest (runs with non-ASCII bytes, runs
longer than 16 bytes: well under 1 % of a corpus's terms) are decoded one by one. Only the block's
distinct terms become Python strings.

Pure: numpy and the lexical module only; no models, no settings, no database.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from ragsite.lexical import go_lower, terms, word_is_term_class

_ALPHABET = np.frombuffer(b"0123456789_abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
# Per byte: its 6-bit code when an ASCII term byte, HIGH when ≥ 0x80, else 0 (not a term byte).
HIGH = 0x40
_CODE = np.zeros(256, dtype=np.uint8)
_CODE[_ALPHABET] = np.arange(1, 38)
_CODE[0x80:] = HIGH
_BYTE = np.zeros(64, dtype=np.uint8)  # a code's byte
_BYTE[1:38] = _ALPHABET
_PAD = bytes(16)  # after the buffer: reading 16 bytes from any run's start stays inside it
_HIGH_BYTES = np.uint64(0x4040404040404040)
# Runs of non-ASCII characters outside the term class (`\w` stands for it: lexical.word_is_term_class).
_NOT_TERM = re.compile(r"[^\x00-\x7f\w]+")


def text_postings(texts: Sequence[str]) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The fields of the `postings.BlockPostings` of rows whose texts are ``texts`` (each row's terms
    being ``lexical.terms`` of its text): vocabulary, term, doc, tf, lengths; term ids in no particular
    order, postings sorted by (term, doc)."""
    rows = len(texts)
    parts = [text if text.isascii() else _spaced(text) for text in texts]
    sizes = np.fromiter(
        (len(part) if part.isascii() else len(part.encode("utf-8")) for part in parts), np.int64, rows
    )
    raw = " ".join(parts).encode("utf-8").lower() + _PAD
    codes = _CODE[np.frombuffer(raw, dtype=np.uint8)]
    # Where runs of term bytes start and stop (the padding ends the last one), and each run's row.
    bounds = np.flatnonzero(np.diff(codes != 0, prepend=False))
    starts, ends = bounds[0::2], bounds[1::2]
    row_starts = np.zeros(rows, dtype=np.int64)
    np.cumsum(sizes[:-1] + 1, out=row_starts[1:])
    lengths = np.diff(np.append(np.searchsorted(starts, row_starts), starts.size))
    row = np.repeat(np.arange(rows, dtype=np.int64), lengths)
    row_bits = max(1, (rows - 1).bit_length())
    if not starts.size or row_bits > 15:  # no term; or too many rows to pack (never a block's 5,000)
        term, doc, tf, seen = _python_postings(raw, starts, ends, row, rows, 0)
        return seen, term, doc.astype(np.int32), tf.astype(np.int32), lengths

    size = ends - starts
    # Each offset's next 8 codes as one big-endian word: a strided view of the codes, no copy.
    words = np.ndarray((codes.size - 7,), dtype=">u8", buffer=codes, strides=(1,))
    head = _masked(words[starts], np.minimum(size, 8))
    tail = np.zeros_like(head)
    beyond = np.flatnonzero(size > 8)
    tail[beyond] = _masked(words[starts[beyond] + 8], np.clip(size[beyond] - 8, 1, 8))
    packable = (((head | tail) & _HIGH_BYTES) == 0) & (size <= 16)

    vocabulary: list[str] = []
    found = []
    short = np.flatnonzero(packable & (size <= 8))
    if short.size:
        key = (_squeezed(head[short]) << np.uint64(row_bits)) | row[short].astype(np.uint64)
        *postings, distinct = _sorted_postings(key, row_bits, len(vocabulary))
        found.append(postings)
        vocabulary += _strings(_letters(distinct))
    medium = np.flatnonzero(packable & (size > 8))
    if (medium.size * medium.size).bit_length() + row_bits > 63:  # the pairs' numbers could overflow
        packable[medium], medium = False, medium[:0]  # (~10⁸ such runs in a block: never 5,000 rows)
    if medium.size:
        (firsts, first), (seconds, second) = (_numbered(_squeezed(part[medium])) for part in (head, tail))
        pair = first.astype(np.uint64) * np.uint64(seconds.size) + second.astype(np.uint64)
        key = (pair << np.uint64(row_bits)) | row[medium].astype(np.uint64)
        *postings, pairs = _sorted_postings(key, row_bits, len(vocabulary))
        found.append(postings)
        halves = (firsts[pairs // np.uint64(seconds.size)], seconds[pairs % np.uint64(seconds.size)])
        vocabulary += _strings(np.hstack([_letters(half) for half in halves]))
    rest = np.flatnonzero(~packable)
    if rest.size:
        *postings, seen = _python_postings(raw, starts[rest], ends[rest], row[rest], rows, len(vocabulary))
        found.append(postings)
        vocabulary += seen
    term, doc, tf = (np.concatenate(column) for column in zip(*found, strict=True))
    return vocabulary, term, doc.astype(np.int32), tf.astype(np.int32), lengths


def _spaced(text: str) -> str:
    """``text`` lowercased, its non-ASCII characters outside the term class replaced by spaces."""
    if not word_is_term_class():  # a Python whose \w is not the class: cut the terms the slow way
        return " ".join(terms(text))
    return _NOT_TERM.sub(" ", go_lower(text))


def _masked(words: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The first ``size`` (1 to 8) bytes of each big-endian word, the rest zeroed, as native uint64."""
    shift = (8 * (8 - size)).astype(np.uint64)
    return (words.astype(np.uint64) >> shift) << shift


def _numbered(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values, sorted, and each value's position among them (a sort and a binary search:
    numpy's sort is vectorised, its argsort, which ``np.unique(return_inverse=True)`` takes, is not)."""
    ordered = np.sort(values)
    distinct = ordered[np.diff(ordered, prepend=~ordered[:1]) != 0]
    return distinct, np.searchsorted(distinct, values)


def _squeezed(words: np.ndarray) -> np.ndarray:
    """Eight 6-bit codes, one a byte, as 48 bits (the first code highest: order and equality kept):
    byte pairs into 12 bits, then those pairs into 24, then into 48."""
    u = np.uint64
    out = (words & u(0x003F003F003F003F)) | ((words & u(0x3F003F003F003F00)) >> u(2))
    out = (out & u(0x00000FFF00000FFF)) | ((out & u(0x0FFF00000FFF0000)) >> u(4))
    return (out & u(0xFFFFFF)) | ((out & u(0x00FFFFFF00000000)) >> u(8))


def _letters(squeezed: np.ndarray) -> np.ndarray:
    """The bytes (n, 8; 0 past a term's end) of the terms whose 48-bit codes are ``squeezed``."""
    shifts = np.uint64(6) * np.arange(7, -1, -1, dtype=np.uint64)
    return _BYTE[(squeezed[:, None] >> shifts) & np.uint64(63)]


def _strings(letters: np.ndarray) -> list[str]:
    """Rows of ASCII bytes, 0 past their ends, as strings (converted by numpy, not one by one)."""
    width = letters.shape[1]
    return np.ascontiguousarray(letters).view(f"S{width}").ravel().astype(f"U{width}").tolist()


def _sorted_postings(key: np.ndarray, row_bits: int, offset: int):
    """(term, row, tf) of keys that are a term's number above ``row_bits`` bits of row, sorted by both,
    terms numbered from ``offset`` in key order; and the distinct terms' numbers."""
    key = np.sort(key)
    first = np.flatnonzero(np.diff(key, prepend=~key[:1]))
    unique = key[first]
    tf = np.diff(np.append(first, key.size))
    packed = unique >> np.uint64(row_bits)
    new = np.diff(packed, prepend=~packed[:1]) != 0
    term = np.cumsum(new) - 1 + offset
    return term, (unique & np.uint64((1 << row_bits) - 1)).astype(np.int64), tf, packed[new]


def _python_postings(raw, starts, ends, row, rows, offset):
    """(term, row, tf, vocabulary) of runs decoded one by one, terms numbered from ``offset``."""
    seen: dict[str, int] = {}
    ids = [
        seen.setdefault(raw[s:e].decode("utf-8"), len(seen))
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True)
    ]
    keys, tf = np.unique(np.asarray(ids, dtype=np.int64) * rows + row, return_counts=True)
    return keys // rows + offset, keys % rows, tf, list(seen)


__all__ = ["text_postings"]
