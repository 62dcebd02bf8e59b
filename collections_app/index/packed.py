"""Postings stored compactly: doc ids as bit-packed deltas in blocks, term frequencies one byte each.

A term's postings (rows ascending) are kept as gaps, each row less the one before (the term's first
row's gap is 0), cut into blocks of BLOCK: a block's gaps in the fewest bits that hold its largest
(``block_bits``), the blocks one after another in one little-endian bit stream, each starting at
``block_at`` (a bit offset). Each block's first row is kept whole too (``block_first``): a term is one
running sum from its first row, and a single block can be read alone (its first gap then unused).
A term frequency is one byte; 255 says "look it up" in the escapes (``tf_escape_at``, the posting's
position, and ``tf_escape``, its frequency).

Both directions are numpy over whole arrays (no Python a posting): packing ORs each gap into the one
or two 64-bit words it lands in, a word's gaps reduced at once; unpacking reads 8 bytes at each gap's
first byte (a strided view, no copy), shifts and masks. A search reads whole terms (`term`) or, for a
few rows, only the blocks that may hold them (`find`: a binary search over the blocks' first rows).

Pure: numpy only; no models, no settings.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

BLOCK = 128
TF_ESCAPE = 255
# Postings a packing pass handles at once (whole terms): bounds the int64 temporaries at 1M rows.
PACK_POSTINGS = 1 << 22
# After the stream: a read of 8 bytes from any gap's first byte stays inside the file.
PADDING = 8
# (file, dtype) of each array, by name; counts are in meta.json ("blocks", "bits_bytes", "tf_escapes").
FILES = {
    "postings_bits": ("postings_bits.u8", "<u1"),
    "block_first": ("block_first.i32", "<i4"),
    "block_bits": ("block_bits.u8", "<u1"),
    "block_at": ("block_at.i64", "<i8"),
    "postings_tf": ("postings_tf.u8", "<u1"),
    "tf_escape_at": ("tf_escape_at.i64", "<i8"),
    "tf_escape": ("tf_escape.i32", "<i4"),
}
_MASKS = (np.uint64(1) << np.arange(33, dtype=np.uint64)) - np.uint64(1)


def block_pointers(indptr: np.ndarray) -> np.ndarray:
    """Each term's first block (and the total last): a term of df postings has ceil(df / BLOCK)."""
    per_term = (np.diff(np.asarray(indptr, dtype=np.int64)) + BLOCK - 1) // BLOCK
    pointers = np.zeros(per_term.size + 1, dtype=np.int64)
    np.cumsum(per_term, out=pointers[1:])
    return pointers


def _blocks_of(lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first posting and the posting count of each block of terms of ``lengths`` postings."""
    per_term = (lengths + BLOCK - 1) // BLOCK
    term_start = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64)
    block_start_of_term = np.concatenate(([0], np.cumsum(per_term)[:-1])).astype(np.int64)
    total = int(per_term.sum())
    nth = np.arange(total, dtype=np.int64) - np.repeat(block_start_of_term, per_term)
    starts = np.repeat(term_start, per_term) + nth * BLOCK
    counts = np.minimum(BLOCK, np.repeat(term_start + lengths, per_term) - starts)
    return starts, counts


class PackedWriter:
    """Packs postings term range by term range into open files (`pack`), then closes them (`close`)."""

    def __init__(self, directory: Path) -> None:
        self.handles = {name: open(directory / filename, "wb") for name, (filename, _) in FILES.items()}
        self.bit = 0  # where the next pass's stream starts (a whole word)
        self.blocks = self.bits_bytes = self.escapes = 0

    def pack(self, lengths: np.ndarray, docs: np.ndarray, tf: np.ndarray, first_posting: int) -> None:
        """Whole terms' postings: ``lengths`` of them a term, their rows ``docs`` and frequencies ``tf``,
        the first being posting number ``first_posting`` of the index."""
        lengths = np.asarray(lengths, dtype=np.int64)
        if not lengths.sum():
            return  # terms in no row: no block
        docs = np.asarray(docs, dtype=np.int64)
        starts, counts = _blocks_of(lengths)
        gaps = np.empty_like(docs)
        gaps[0] = 0
        np.subtract(docs[1:], docs[:-1], out=gaps[1:])
        gaps[(np.cumsum(lengths) - lengths)[lengths > 0]] = 0  # a term's first row is its block_first
        # The bits of a block's largest gap: frexp's exponent is exactly the bit length of an integer.
        widths = np.frexp(np.maximum.reduceat(gaps, starts).astype(np.float64))[1].astype(np.int64)
        sizes = widths * counts
        block_at = np.zeros(starts.size, dtype=np.int64)
        np.cumsum(sizes[:-1], out=block_at[1:])
        nth = np.arange(docs.size, dtype=np.int64) - np.repeat(starts, counts)
        bit = np.repeat(block_at, counts) + nth * np.repeat(widths, counts)
        total_bits = int(block_at[-1] + sizes[-1])
        # A gap of 0 bits may start at the stream's end: room for its word and the next.
        words = np.zeros(total_bits // 64 + 2, dtype=np.uint64)
        value = gaps.astype(np.uint64)
        word, offset = bit >> 6, (bit & 63).astype(np.uint64)
        runs = np.flatnonzero(np.diff(word, prepend=-1))  # word never decreases: one OR per word
        words[word[runs]] |= np.bitwise_or.reduceat(value << offset, runs)
        # The part past the word's end (0 when the gap fits): v >> (64 - offset), shifting at most 63.
        beyond = (value >> np.uint64(1)) >> (np.uint64(63) - offset)
        words[word[runs] + 1] |= np.bitwise_or.reduceat(beyond, runs)
        self.handles["postings_bits"].write(words.astype("<u8").tobytes())
        self.handles["block_first"].write(docs[starts].astype("<i4").tobytes())
        self.handles["block_bits"].write(widths.astype("<u1").tobytes())
        self.handles["block_at"].write((block_at + self.bit).astype("<i8").tobytes())
        small = np.asarray(tf)
        big = np.flatnonzero(small >= TF_ESCAPE)
        self.handles["postings_tf"].write(np.minimum(small, TF_ESCAPE).astype("<u1").tobytes())
        self.handles["tf_escape_at"].write((big + first_posting).astype("<i8").tobytes())
        self.handles["tf_escape"].write(small[big].astype("<i4").tobytes())
        self.bit += 64 * words.size
        self.blocks += starts.size
        self.escapes += big.size

    def close(self) -> dict:
        """Pad and close the files; the counts meta.json keeps."""
        self.handles["postings_bits"].write(bytes(PADDING))
        for handle in self.handles.values():
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
        self.bits_bytes = self.bit // 8 + PADDING
        return {"blocks": self.blocks, "bits_bytes": self.bits_bytes, "tf_escapes": self.escapes}


def write_packed(directory: Path, indptr: np.ndarray, docs: np.ndarray, tf: np.ndarray) -> dict:
    """Pack CSR postings (``indptr``, ``docs``, ``tf``) into ``directory``, PACK_POSTINGS at a time."""
    writer = PackedWriter(directory)
    try:
        lengths = np.diff(np.asarray(indptr, dtype=np.int64))
        term = 0
        while term < lengths.size:
            lo = int(indptr[term])
            # Whole terms up to PACK_POSTINGS postings (at least one term).
            end = max(term + 1, int(np.searchsorted(indptr, lo + PACK_POSTINGS, side="right")) - 1)
            end = min(end, lengths.size)
            hi = int(indptr[end])
            writer.pack(lengths[term:end], docs[lo:hi], tf[lo:hi], lo)
            term = end
    except BaseException:
        for handle in writer.handles.values():
            handle.close()
        raise
    return writer.close()


class PackedPostings:
    """The packed postings of one field, over mapped arrays (`FILES`) and the terms' ``indptr``."""

    def __init__(self, arrays: dict[str, np.ndarray], indptr: np.ndarray) -> None:
        self.indptr = indptr
        self.block_first = arrays["block_first"]
        self.block_bits = arrays["block_bits"]
        self.block_at = arrays["block_at"]
        self.tf = arrays["postings_tf"]
        self.escape_at, self.escape = arrays["tf_escape_at"], arrays["tf_escape"]
        bits = arrays["postings_bits"]
        # Each byte offset's next 8 bytes as one little-endian word: a strided view of the map, no copy.
        self.words = (
            np.ndarray((bits.size - PADDING + 1,), dtype="<u8", buffer=bits, strides=(1,))
            if bits.size >= PADDING
            else np.zeros(0, dtype="<u8")
        )
        self.pointers = block_pointers(indptr)
        if int(self.pointers[-1]) != self.block_first.size:
            raise ValueError("the blocks do not close on the terms' postings")

    def span(self, term_id: int) -> tuple[int, int]:
        return int(self.indptr[term_id]), int(self.indptr[term_id + 1])

    def term(self, term_id: int) -> tuple[np.ndarray, np.ndarray]:
        """A term's rows (int64, ascending) and frequencies (int32)."""
        lo, hi = self.span(term_id)
        first, last = int(self.pointers[term_id]), int(self.pointers[term_id + 1])
        if hi == lo:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        # A block's width and start repeated over its postings (cheaper than a gather a posting).
        widths = np.repeat(self.block_bits[first:last], BLOCK)[: hi - lo]
        bit = np.repeat(self.block_at[first:last], BLOCK)[: hi - lo]
        within = np.arange(hi - lo, dtype=np.int64)
        within &= BLOCK - 1
        within *= widths
        bit += within
        rows = self._gaps(widths, bit)
        np.cumsum(rows, out=rows)
        rows += int(self.block_first[first])
        return rows, self.frequencies(lo, hi)

    def _gaps(self, widths: np.ndarray, bit: np.ndarray) -> np.ndarray:
        """The gaps (int64) of ``widths`` bits at bit offsets ``bit``."""
        gaps = self.words[bit >> 3]  # a fancy index: np.take copies an unaligned view whole first
        gaps >>= (bit & 7).astype(np.uint64)
        gaps &= np.take(_MASKS, widths)  # np.take: 3x faster than a fancy index here
        return gaps.view(np.int64)  # under 2^38: the same value

    def frequencies(self, lo: int, hi: int) -> np.ndarray:
        tf = self.tf[lo:hi].astype(np.int32)
        a, b = np.searchsorted(self.escape_at, [lo, hi])
        if b > a:
            tf[np.asarray(self.escape_at[a:b]) - lo] = self.escape[a:b]
        return tf

    def find(self, term_ids: list[int], rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each term (in order) and each of ``rows`` (ascending): the term's frequency in that row,
        0 when the row lacks it, as a (terms, rows) array; and whether it holds it.

        Only the blocks that may hold a row are unpacked: the last block of the term starting at or
        before it."""
        rows = np.asarray(rows, dtype=np.int64)
        wanted = []
        for term_id in term_ids:
            first, last = int(self.pointers[term_id]), int(self.pointers[term_id + 1])
            at = np.searchsorted(self.block_first[first:last], rows, side="right") - 1
            wanted.append(np.where(at >= 0, at + first, -1))
        wanted = np.stack(wanted) if wanted else np.zeros((0, rows.size), dtype=np.int64)
        blocks = np.unique(wanted[wanted >= 0])
        tf = np.zeros(wanted.shape, dtype=np.int32)
        if not blocks.size:
            return tf, tf > 0
        # The blocks' postings: which term each block is of, its first posting, and its count.
        term_of = np.searchsorted(self.pointers, blocks, side="right") - 1
        first_posting = np.asarray(self.indptr)[term_of] + (blocks - self.pointers[term_of]) * BLOCK
        counts = np.minimum(BLOCK, np.asarray(self.indptr)[term_of + 1] - first_posting)
        within = np.arange(int(counts.sum()), dtype=np.int64) - np.repeat(np.cumsum(counts) - counts, counts)
        block = np.repeat(blocks, counts)
        widths = np.take(self.block_bits, block)
        found = self._gaps(widths, np.take(self.block_at, block) + within * widths)
        found[within == 0] = 0  # each block read alone, from its first row
        np.cumsum(found, out=found)
        starts = np.cumsum(counts) - counts
        found += np.repeat(self.block_first[blocks] - found[starts], counts)
        posting = np.repeat(first_posting, counts) + within
        # (block, row) keys ascend: blocks ascending, rows ascending within a block.
        keys = block * (1 << 32) + found
        asked = np.where(wanted >= 0, wanted, 0) * (1 << 32) + rows[None, :]
        at = np.minimum(np.searchsorted(keys, asked), keys.size - 1)
        holds = (keys[at] == asked) & (wanted >= 0)
        hit = posting[at[holds]]
        small = np.asarray(self.tf[hit]).astype(np.int32)
        escaped = small == TF_ESCAPE
        if escaped.any():
            small[escaped] = self.escape[np.searchsorted(self.escape_at, hit[escaped])]
        tf[holds] = small
        return tf, holds

    def all(self) -> tuple[np.ndarray, np.ndarray]:
        """Every posting's row (int32) and frequency (the CSR arrays seed 004's bm25.idx is written from),
        whole terms PACK_POSTINGS at a time."""
        indptr = np.asarray(self.indptr, dtype=np.int64)
        rows = np.zeros(int(indptr[-1]), dtype=np.int32)
        term = 0
        while term < indptr.size - 1:
            lo = int(indptr[term])
            end = max(term + 1, int(np.searchsorted(indptr, lo + PACK_POSTINGS, side="right")) - 1)
            end = min(end, indptr.size - 1)
            hi = int(indptr[end])
            if hi > lo:
                lengths = np.diff(indptr[term : end + 1])
                starts, counts = _blocks_of(lengths)
                blocks = np.arange(int(self.pointers[term]), int(self.pointers[end]), dtype=np.int64)
                block = np.repeat(blocks, counts)
                widths = np.take(self.block_bits, block)
                within = np.arange(hi - lo) - np.repeat(starts, counts)
                gaps = self._gaps(widths, np.take(self.block_at, block) + within * widths)
                np.cumsum(gaps, out=gaps)
                # Each term's running sum restarts at its first row (its first gap is 0).
                firsts = np.cumsum(lengths) - lengths
                kept = lengths > 0
                base = self.block_first[self.pointers[term:end][kept]] - gaps[firsts[kept]]
                gaps += np.repeat(base, lengths[kept])
                rows[lo:hi] = gaps
            term = end
        return rows, self.frequencies(0, rows.size)


__all__ = ["BLOCK", "FILES", "TF_ESCAPE", "PackedPostings", "PackedWriter", "block_pointers", "write_packed"]
