"""Postings stored compactly: each term's rows as gaps in 1, 2 or 4 bytes, term frequencies in one byte.

A term's postings (rows ascending) are kept as gaps, each row less the one before, the term's first
gap being 0 and its first row kept in ``block_first``. All of a term's gaps take the narrowest of 1, 2
or 4 bytes (``term_width``) that costs the fewest bytes once the gaps too wide for it are counted: a
gap that does not fit is written as the width's largest value and kept whole among the escapes
(``gap_escape_at``, the posting's position, and ``gap_escape``). A term's gaps start at ``term_at``
(a byte offset, a multiple of 4) in ``postings_gaps.u8``. Every BLOCK-th row of a term is kept whole
too (``block_first``), so a few rows are found by reading only the blocks that may hold them.

A term frequency is one byte; 255 says "look it up" in the escapes (``tf_escape_at``, ``tf_escape``).

Reading a term is a view of its bytes, one widening, the escapes put back and one running sum: about
3 ns a posting, where bit-packed gaps (tried first, 0.12 B a posting smaller) took 13-17 ns and made
the pruned lexical search 9x slower (docs/decisions/0070-compact-index.md). Both directions are numpy
over whole arrays. The common terms a search asks for a few rows every question are decoded once and
kept (`DECODED_POSTINGS` a process at most).

Pure: numpy only; no models, no settings.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

# Postings a block: a few rows are looked up by reading their blocks only. 64: the median pruned
# question (59 rows) read a seventh of a common term's 128-posting blocks.
BLOCK = 64
# Past 1 / WHOLE_SHARE of a term's blocks, `find` reads the whole term (cheaper a posting, fewer steps).
WHOLE_SHARE = 4
TF_ESCAPE = 255
WIDTHS = (1, 2, 4)
_TYPES = {1: "<u1", 2: "<u2", 4: "<u4"}
# What an escape costs besides its gap's slot: its position (8 bytes) and its gap (4).
_ESCAPE_BYTES = 12
# A term of at least this many postings that `find` searches is decoded whole once and kept (its rows as
# int32), up to DECODED_POSTINGS a process: the pruned search asks the same few common terms ("the",
# "of") for a few rows every question, and searching kept rows costs a tenth of unpacking their blocks.
DECODED_LEAST = 1 << 12
DECODED_POSTINGS = 1 << 22  # 16 MiB of rows (and the frequencies' escapes, if any)
# Postings a packing pass handles at once (whole terms): bounds the int64 temporaries at 1M rows.
PACK_POSTINGS = 1 << 22
# (file, dtype) of each array, by name; counts are in meta.json ("gap_bytes", "blocks", the escapes').
FILES = {
    "postings_gaps": ("postings_gaps.u8", "<u1"),
    "term_at": ("term_at.i64", "<i8"),
    "term_width": ("term_width.u8", "<u1"),
    "block_first": ("block_first.i32", "<i4"),
    "gap_escape_at": ("gap_escape_at.i64", "<i8"),
    "gap_escape": ("gap_escape.i32", "<i4"),
    "postings_tf": ("postings_tf.u8", "<u1"),
    "tf_escape_at": ("tf_escape_at.i64", "<i8"),
    "tf_escape": ("tf_escape.i32", "<i4"),
}


def block_pointers(indptr: np.ndarray) -> np.ndarray:
    """Each term's first block (and the total last): a term of df postings has ceil(df / BLOCK)."""
    per_term = (np.diff(np.asarray(indptr, dtype=np.int64)) + BLOCK - 1) // BLOCK
    pointers = np.zeros(per_term.size + 1, dtype=np.int64)
    np.cumsum(per_term, out=pointers[1:])
    return pointers


class PackedWriter:
    """Packs postings term range by term range into open files (`pack`), then closes them (`close`)."""

    def __init__(self, directory: Path) -> None:
        self.handles = {name: open(directory / filename, "wb") for name, (filename, _) in FILES.items()}
        self.at = 0  # bytes of gaps written
        self.counts = {"gap_bytes": 0, "blocks": 0, "gap_escapes": 0, "tf_escapes": 0}

    def pack(self, lengths: np.ndarray, docs: np.ndarray, tf: np.ndarray, first_posting: int) -> None:
        """Whole terms' postings: ``lengths`` of them a term, their rows ``docs`` and frequencies ``tf``,
        the first being posting number ``first_posting`` of the index."""
        lengths = np.asarray(lengths, dtype=np.int64)
        docs = np.asarray(docs, dtype=np.int64)
        firsts = np.cumsum(lengths) - lengths
        gaps = np.zeros(docs.size, dtype=np.int64)
        np.subtract(docs[1:], docs[:-1], out=gaps[1:])
        gaps[firsts[lengths > 0]] = 0  # a term's first row is its block_first
        term = np.repeat(np.arange(lengths.size), lengths)
        # Each width's cost a term: its slots, and an escape for each gap at or past its largest value.
        costs = [
            lengths * width
            + _ESCAPE_BYTES * np.bincount(term, gaps >= (1 << 8 * width) - 1, minlength=lengths.size)
            if width < 4
            else lengths * width
            for width in WIDTHS
        ]
        width = np.asarray(WIDTHS)[np.argmin(np.stack(costs), axis=0)]
        sizes = (lengths * width + 3) // 4 * 4  # each term's gaps start on a multiple of 4 bytes
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        out = np.zeros(int(sizes.sum()), dtype=np.uint8)
        limit = (1 << 8 * np.repeat(width, lengths).astype(np.int64)) - 1
        escaped = np.flatnonzero(gaps >= limit)
        kept = np.minimum(gaps, limit)
        for w in WIDTHS:  # the terms of each width at once, as little-endian integers of that width
            mine = np.flatnonzero(width[term] == w)
            if mine.size:
                offset = np.repeat(starts, lengths)[mine] + (mine - np.repeat(firsts, lengths)[mine]) * w
                for byte in range(w):
                    out[offset + byte] = (kept[mine] >> (8 * byte)) & 0xFF
        self._write("postings_gaps", out)
        self._write("term_at", starts + self.at)
        self._write("term_width", width.astype("<u1"))
        nth = np.arange(docs.size) - np.repeat(firsts, lengths)
        self._write("block_first", docs[nth % BLOCK == 0].astype("<i4"))
        self._write("gap_escape_at", (escaped + first_posting).astype("<i8"))
        self._write("gap_escape", gaps[escaped].astype("<i4"))
        tf = np.asarray(tf)
        big = np.flatnonzero(tf >= TF_ESCAPE)
        self._write("postings_tf", np.minimum(tf, TF_ESCAPE).astype("<u1"))
        self._write("tf_escape_at", (big + first_posting).astype("<i8"))
        self._write("tf_escape", tf[big].astype("<i4"))
        self.at += out.size
        self.counts["gap_bytes"] = self.at
        self.counts["blocks"] += int(np.count_nonzero(nth % BLOCK == 0))
        self.counts["gap_escapes"] += escaped.size
        self.counts["tf_escapes"] += big.size

    def _write(self, name: str, array: np.ndarray) -> None:
        self.handles[name].write(np.ascontiguousarray(array, dtype=FILES[name][1]).tobytes())

    def close(self) -> dict:
        """Close the files; the counts meta.json keeps."""
        for handle in self.handles.values():
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
        return dict(self.counts)


def _passes(indptr: np.ndarray):
    """Term ranges ``(first, end)`` of whole terms, about PACK_POSTINGS postings each (at least one term)."""
    terms, term = indptr.size - 1, 0
    while term < terms:
        lo = int(indptr[term])
        end = max(term + 1, int(np.searchsorted(indptr, lo + PACK_POSTINGS, side="right")) - 1)
        end = min(end, terms)
        yield term, end
        term = end


def write_packed(directory: Path, indptr: np.ndarray, docs: np.ndarray, tf: np.ndarray) -> dict:
    """Pack CSR postings (``indptr``, ``docs``, ``tf``) into ``directory``, PACK_POSTINGS at a time."""
    indptr = np.asarray(indptr, dtype=np.int64)
    writer = PackedWriter(directory)
    try:
        for term, end in _passes(indptr):
            lo, hi = int(indptr[term]), int(indptr[end])
            writer.pack(np.diff(indptr[term : end + 1]), docs[lo:hi], tf[lo:hi], lo)
    except BaseException:
        for handle in writer.handles.values():
            handle.close()
        raise
    return writer.close()


class PackedPostings:
    """The packed postings of one field, over mapped arrays (`FILES`) and the terms' ``indptr``."""

    def __init__(self, arrays: dict[str, np.ndarray], indptr: np.ndarray) -> None:
        self.indptr = indptr
        self.gaps = arrays["postings_gaps"]
        self.term_at, self.term_width = arrays["term_at"], arrays["term_width"]
        self.block_first = arrays["block_first"]
        self.gap_escape_at, self.gap_escape = arrays["gap_escape_at"], arrays["gap_escape"]
        self.tf = arrays["postings_tf"]
        self.tf_escape_at, self.tf_escape = arrays["tf_escape_at"], arrays["tf_escape"]
        self.pointers = block_pointers(indptr)
        if int(self.pointers[-1]) != self.block_first.size:
            raise ValueError("the blocks do not close on the terms' postings")
        if self.term_at.size + 1 != indptr.size or self.term_width.size + 1 != indptr.size:
            raise ValueError("the gaps' offsets do not cover the terms")
        self._decoded: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # common terms' rows (`find`)
        self._decoded_postings = 0

    def span(self, term_id: int) -> tuple[int, int]:
        return int(self.indptr[term_id]), int(self.indptr[term_id + 1])

    def _raw(self, term_id: int, lo: int, hi: int) -> np.ndarray:
        """A term's stored gaps, a view of the map in their width."""
        width, at = int(self.term_width[term_id]), int(self.term_at[term_id])
        if width not in _TYPES or at < 0 or at + (hi - lo) * width > self.gaps.size:
            raise ValueError(f"term {term_id}'s gaps lie outside their file")
        return self.gaps[at : at + (hi - lo) * width].view(_TYPES[width])

    def term(self, term_id: int, *, keep: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """A term's rows (int64, ascending) and frequencies (`frequencies`); ``keep``: int32 rows, kept for
        the next question when the term is common enough (`_kept`)."""
        lo, hi = self.span(term_id)
        if keep and (kept := self._kept(term_id, hi - lo)) is not None:
            return kept
        if hi == lo:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        rows = self._raw(term_id, lo, hi).astype(np.int64)
        a, b = np.searchsorted(self.gap_escape_at, [lo, hi])
        if b > a:
            rows[np.asarray(self.gap_escape_at[a:b]) - lo] = self.gap_escape[a:b]
        rows[0] = self.block_first[self.pointers[term_id]]  # its gap is 0: the sum starts from the row
        np.cumsum(rows, out=rows)
        return rows, self.frequencies(lo, hi)

    def frequencies(self, lo: int, hi: int) -> np.ndarray:
        """The frequencies of postings lo to hi: the map's bytes themselves when none is escaped (read-only),
        else int32."""
        a, b = np.searchsorted(self.tf_escape_at, [lo, hi])
        if b == a:
            return self.tf[lo:hi]
        tf = self.tf[lo:hi].astype(np.int32)
        tf[np.asarray(self.tf_escape_at[a:b]) - lo] = self.tf_escape[a:b]
        return tf

    def find(self, term_id: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The term's frequency in each of ``rows`` (ascending; 0 where the row lacks it) and whether it
        holds it, reading only the blocks that may hold them (the last block starting at or before each
        row), or the whole term when those are more than 1 / WHOLE_SHARE of its blocks."""
        rows = np.asarray(rows, dtype=np.int64)
        lo, hi = self.span(term_id)
        first, last = int(self.pointers[term_id]), int(self.pointers[term_id + 1])
        if hi == lo or not rows.size:
            return np.zeros(rows.size, dtype=np.int32), np.zeros(rows.size, dtype=bool)
        kept = self._kept(term_id, hi - lo)
        if kept is not None:
            docs, tf = kept
            where = np.minimum(np.searchsorted(docs, rows.astype(docs.dtype)), docs.size - 1)
            holds = docs[where] == rows
            return np.where(holds, tf[where], 0), holds
        at = np.searchsorted(self.block_first[first:last], rows, side="right") - 1
        at = at[at >= 0]
        blocks = at[np.diff(at, prepend=-1) != 0]  # rows ascend, so their blocks do: distinct by a diff
        if blocks.size * WHOLE_SHARE > last - first:
            docs, tf = self.term(term_id)
            where = np.minimum(np.searchsorted(docs, rows), docs.size - 1)
            holds = docs[where] == rows
            return np.where(holds, tf[where], 0), holds
        # The blocks' postings as a (blocks, BLOCK) array: a running sum along each restarts per block.
        n = hi - lo
        nth = blocks[:, None] * BLOCK + np.arange(BLOCK)[None, :]  # places in the term, ascending
        found = np.take(self._raw(term_id, lo, hi), np.minimum(nth, n - 1)).astype(np.int64)
        a, b = np.searchsorted(self.gap_escape_at, [lo, hi])
        if b > a:  # escapes among the blocks read
            places = np.asarray(self.gap_escape_at[a:b]) - lo
            where = np.minimum(np.searchsorted(nth.ravel(), places), nth.size - 1)
            hit = nth.ravel()[where] == places
            found.ravel()[where[hit]] = np.asarray(self.gap_escape[a:b])[hit]
        found[:, 0] = 0  # each block read alone, from its first row
        found[nth >= n] = 0  # past the term's end (its last block): repeats of its last row
        np.cumsum(found, axis=1, out=found)
        found += self.block_first[first + blocks][:, None]
        found, nth = found.ravel(), nth.ravel()
        where = np.minimum(np.searchsorted(found, rows), found.size - 1)  # the first of any repeats
        holds = found[where] == rows
        tf = np.zeros(rows.size, dtype=np.int32)
        hit = lo + nth[where[holds]]
        tf[holds] = self.tf[hit]
        escaped = np.flatnonzero(holds)[tf[holds] == TF_ESCAPE]
        if escaped.size:
            tf[escaped] = self.tf_escape[np.searchsorted(self.tf_escape_at, lo + nth[where[escaped]])]
        return tf, holds

    def _kept(self, term_id: int, postings: int) -> tuple[np.ndarray, np.ndarray] | None:
        """A common term's rows (int32) and frequencies, decoded once and kept while the budget lasts."""
        kept = self._decoded.get(term_id)
        if (
            kept is None
            and postings >= DECODED_LEAST
            and self._decoded_postings + postings <= DECODED_POSTINGS
        ):
            rows, tf = self.term(term_id)
            kept = self._decoded[term_id] = (rows.astype(np.int32), tf)
            self._decoded_postings += postings
        return kept

    def all(self) -> tuple[np.ndarray, np.ndarray]:
        """Every posting's row (int32) and frequency (the CSR arrays seed 004's bm25.idx is written from)."""
        rows = np.zeros(int(self.indptr[-1]), dtype=np.int32)
        for term_id in range(self.indptr.size - 1):
            lo, hi = self.span(term_id)
            if hi > lo:
                rows[lo:hi] = self.term(term_id)[0]
        return rows, self.frequencies(0, rows.size).astype(np.int32)


__all__ = ["BLOCK", "FILES", "TF_ESCAPE", "PackedPostings", "PackedWriter", "block_pointers", "write_packed"]
