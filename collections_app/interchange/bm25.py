"""The interchange format's bm25.idx: its bytes, and the check that a stored one is what the texts build."""

from __future__ import annotations

import math
import struct

import numpy as np

from ragsite.lexical import DEFAULT_B, DEFAULT_K1, BM25Index

from .files import AVGDL_RELATIVE_TOLERANCE, BM25, MAGIC, VERSION, InterchangeError

_HEADER = struct.Struct("<4sIIId")
_U16 = struct.Struct("<H")
_TERM_COUNTS = struct.Struct("<II")

# --- bm25.idx ---------------------------------------------------------------------


def _leb128(value: int, out: bytearray) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_bm25(index: BM25Index) -> bytes:
    """Seed 004's layout: header, doc_len, then each term (sorted by UTF-8 bytes) with its postings
    as (doc gap, tf) unsigned LEB128 pairs, the first gap being the document number itself."""
    out = bytearray(_HEADER.pack(MAGIC, VERSION, index.n_docs, index.n_terms, float(index.avgdl)))
    out += np.asarray(index.doc_len, dtype="<u4").tobytes()
    docs, tfs, indptr = index.postings_doc.tolist(), index.postings_tf.tolist(), index.indptr.tolist()
    encoded = [term.encode("utf-8") for term in index.vocabulary]
    # The vocabulary is already in code point order, which is UTF-8 byte order; sorting the bytes
    # again costs little and makes the file's order this function's own promise.
    order = sorted(range(len(encoded)), key=encoded.__getitem__)
    for term_id in order:
        term = encoded[term_id]
        if len(term) > 0xFFFF:
            raise InterchangeError(BM25, "term_len", f"a term of {len(term)} bytes does not fit in a u16")
        postings = bytearray()
        previous = 0
        for position in range(indptr[term_id], indptr[term_id + 1]):
            _leb128(docs[position] - previous, postings)
            _leb128(tfs[position], postings)
            previous = docs[position]
        out += _U16.pack(len(term)) + term
        out += _TERM_COUNTS.pack(indptr[term_id + 1] - indptr[term_id], len(postings))
        out += postings
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.offset = data, 0

    def take(self, size: int, what: str) -> bytes:
        end = self.offset + size
        if end > len(self.data):
            raise InterchangeError(BM25, what, f"truncated at byte {self.offset} (needs {size} more bytes)")
        chunk = self.data[self.offset : end]
        self.offset = end
        return chunk


def _read_leb128(data: bytes, offset: int, end: int, what: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if offset >= end:
            raise InterchangeError(BM25, what, "a varint runs past postings_bytes")
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, offset
        shift += 7
        if shift > 35:
            raise InterchangeError(BM25, what, "a varint is longer than a u32")


def decode_bm25(
    data: bytes, *, k1: float = DEFAULT_K1, b: float = DEFAULT_B, expected: BM25Index | None = None
) -> BM25Index:
    """Parse and check bm25.idx into a :class:`BM25Index` (whose avgdl is checked against the file's).

    ``expected`` is the index the texts give, when known: n_docs and doc_len are compared with it
    field by field, before avgdl, so a wrong length is named as the length and not as the mean.
    """
    reader = _Reader(data)
    magic, version, n_docs, n_terms, avgdl = _HEADER.unpack(reader.take(_HEADER.size, "header"))
    if magic != MAGIC:
        raise InterchangeError(BM25, "magic", f"expected {MAGIC!r}, found {magic!r}")
    if version != VERSION:
        raise InterchangeError(BM25, "version", f"expected {VERSION}, found {version}")
    if expected is not None and n_docs != expected.n_docs:
        raise InterchangeError(BM25, "n_docs", f"{n_docs}, but there are {expected.n_docs} chunks")
    if 4 * n_docs > len(data) - reader.offset:
        raise InterchangeError(
            BM25,
            "n_docs",
            f"{n_docs} needs {4 * n_docs} bytes of doc_len, but only {len(data) - reader.offset} follow",
        )
    doc_len = np.frombuffer(reader.take(4 * n_docs, "doc_len"), dtype="<u4").astype(np.int64)
    if expected is not None:
        differ = np.flatnonzero(doc_len != expected.doc_len)
        if differ.size:
            doc = int(differ[0])
            raise InterchangeError(
                BM25,
                f"doc_len[{doc}]",
                f"{int(doc_len[doc])}, but the text of chunk {doc} has {int(expected.doc_len[doc])} terms",
            )
    vocabulary: list[str] = []
    indptr = [0]
    postings_doc: list[int] = []
    postings_tf: list[int] = []
    previous_term = None
    for number in range(n_terms):
        (term_len,) = _U16.unpack(reader.take(2, f"term {number} term_len"))
        raw = reader.take(term_len, f"term {number} bytes")
        try:
            term = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InterchangeError(BM25, f"term {number}", "not UTF-8") from None
        if previous_term is not None and raw <= previous_term:
            raise InterchangeError(
                BM25, f"term {number}", f'"{term}" is not after the previous term in byte order'
            )
        previous_term = raw
        df, postings_bytes = _TERM_COUNTS.unpack(reader.take(8, f'term "{term}" df'))
        block = reader.take(postings_bytes, f'term "{term}" postings')
        offset, doc = 0, -1
        for _ in range(df):
            gap, offset = _read_leb128(block, offset, len(block), f'term "{term}" postings')
            tf, offset = _read_leb128(block, offset, len(block), f'term "{term}" postings')
            if doc >= 0 and gap == 0:
                raise InterchangeError(BM25, f'term "{term}" postings', "a document appears twice")
            doc = gap if doc < 0 else doc + gap
            if doc >= n_docs:
                raise InterchangeError(
                    BM25, f'term "{term}" postings', f"document {doc} is not below n_docs {n_docs}"
                )
            if tf == 0:
                raise InterchangeError(BM25, f'term "{term}" postings', "a term frequency is 0")
            postings_doc.append(doc)
            postings_tf.append(tf)
        if offset != len(block):
            raise InterchangeError(
                BM25, f'term "{term}" postings_bytes', f"{postings_bytes} bytes hold more than df={df} pairs"
            )
        vocabulary.append(term)
        indptr.append(len(postings_doc))
    if reader.offset != len(data):
        raise InterchangeError(BM25, "(file)", f"{len(data) - reader.offset} bytes after the last term")
    index = BM25Index(
        vocabulary=vocabulary,
        doc_len=doc_len,
        indptr=np.asarray(indptr),
        postings_doc=np.asarray(postings_doc),
        postings_tf=np.asarray(postings_tf),
        k1=k1,
        b=b,
    )
    if not math.isclose(avgdl, index.avgdl, rel_tol=AVGDL_RELATIVE_TOLERANCE, abs_tol=1e-12):
        raise InterchangeError(BM25, "avgdl", f"{avgdl!r} is not the mean of doc_len ({index.avgdl!r})")
    return index


def _compare_bm25(stored: BM25Index, rebuilt: BM25Index) -> None:
    """Name the first way the file's terms differ from what the texts give (its lengths are checked on
    reading)."""
    if stored.vocabulary != rebuilt.vocabulary:
        missing = sorted(set(rebuilt.vocabulary) - set(stored.vocabulary))
        extra = sorted(set(stored.vocabulary) - set(rebuilt.vocabulary))
        detail = f'lacks "{missing[0]}"' if missing else f'has "{extra[0]}", which no text contains'
        raise InterchangeError(BM25, "terms", f"the vocabulary differs from the texts' terms: it {detail}")
    for term_id, term in enumerate(rebuilt.vocabulary):
        lo, hi = rebuilt.indptr[term_id], rebuilt.indptr[term_id + 1]
        slo, shi = stored.indptr[term_id], stored.indptr[term_id + 1]
        if (
            hi - lo != shi - slo
            or not np.array_equal(rebuilt.postings_doc[lo:hi], stored.postings_doc[slo:shi])
            or not np.array_equal(rebuilt.postings_tf[lo:hi], stored.postings_tf[slo:shi])
        ):
            raise InterchangeError(BM25, f'term "{term}" postings', "differ from the texts' terms")
