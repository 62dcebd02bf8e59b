"""One build's search index as flat files, written once and memory-mapped read-only by every process.

The build writes the arrays once, next to the store, and each process maps them: pages are shared
through the OS page cache, so a further worker costs almost no private memory and opens a collection
in milliseconds (a process used to build its own copy from the rows: ~25 KB and ~1 ms a paragraph).

The directory of one build (``<root>/c<collection>/<key>/``) holds, little-endian:

* ``meta.json`` — counts, width, BM25 constants, the terms' analyzer, format version; written last;
* ``row_paragraph.i64``, ``row_document.i64`` — per row (rows in ordinal order): the paragraph and
  document ids; texts stay in the database and are read only for hits and their neighbours;
* the vectors, once (``n_vectors × d``, the store's float16 values): ``vectors.f16`` in the IVF lists'
  order when the build has lists (``ivf_*.bin``; ``vector_at.i32`` gives each vector's place in it),
  else ``vectors.f32``, widened, in vector order (every search scans them all: format.py says why);
  ``vector_row.i32`` — by vector id, a paragraph's windows consecutive, each naming its row
  (`windows.pool_windows`);
* ``doc_len.i32``, ``indptr.i64`` and the packed postings (`index.packed`: rows as gaps of 1, 2 or 4
  bytes a term, frequencies one byte each) — seed 004's BM25 postings, term ids in UTF-8 byte order;
  BM25's weights are computed from tf and the row's length as a search reads them;
* ``vocab.bin`` + ``vocab_offsets.i64`` — the sorted vocabulary, searched in place (no dictionary);
* ``entries/`` and ``entries_context/`` — with ENTRIES, the entries of a list, table or Q/A run
  (`text.entries`) as rows of their own (their text and one vector each; their row's context), with
  ``entry_row.i32`` (each one's row, ascending) and ``entry_span.i32`` (its start and end in the row's
  text); ranking scores a row by its best entry too (`ranking.entry_scores`);
* ``context/`` and ``carried/`` — further lexical fields over the same rows, when some row has one:
  each row's "title › section", and each row's *carried opening* (the text it shares with earlier
  rows, ``stitch.carried_openings``) with ``carried/carried_from.i32``, the first earlier row each
  row shares text with; a reader who may not read that row scores this one without its opening
  (:meth:`MappedIndex.view`).

Written under a temporary name and renamed into place, a reader sees a whole index or none. BM25 is
computed at query time from tf and document length, so statistics can be any subset's (a reader's
view) without a copy (:meth:`MappedIndex.bm25`); the all-rows view keeps each row's length term of
the denominator (`format.bm25_norms`) once per process, 8 bytes a row.

Pure: numpy only; no models, no settings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from ragsite.analyzers import SIMPLE
from ragsite.lexical import BM25Index, idf

from ..text.context import lexical_with_context
from ..text.windows import lean_to_first, pool_windows
from .format import (
    ARRAYS,
    FORMAT,
    VECTOR_POSITION_FILE,
    IndexUnusable,
    View,
    bm25_norms,
    bm25_weights,
    map_exact,
    vector_file,
    weights_of,
)
from .ivf import IVFLists
from .packed import FILES as PACKED_FILES
from .packed import PackedPostings
from .vector_codec import HalfQuery, half_products, half_query, question_vector, reused

# Vectors per block when scanning every float16 one (`vector_codec.half_products`, no widened copy): a
# 100,000 x 384 scan took 5.3 ms in blocks of 512, 5.0 in 2,048 and 5.3 in 65,536 (widening each block
# to float32 for numpy's product took 9-14 ms).
VECTOR_BLOCK = 2048
# Windows gathered per block when scoring some by id (a probe, exact candidates): 1.5 MiB at 384 d, under
# a warmed master's mmap threshold; one 7 MiB copy left each web worker thread an arena that size
# (docs/decisions/0031).
GATHER_BLOCK = 1024
# Question terms whose ids an index remembers ("the", "of", "in" recur; a look-up is ~17 steps).
TERMS_REMEMBERED = 1 << 14


class MappedIndex:
    """One build's index, memory-mapped. Scores are float64 (BM25) and float32 (cosine)."""

    def __init__(self, path: Path, *, analyzer: str | None = None) -> None:
        """Map the index at ``path``; with ``analyzer``, refuse one written with another (IndexUnusable),
        whose terms a question analyzed that way would not meet."""
        self._term_ids: dict[str, int | None] = {}
        self.path = Path(path)
        try:
            self.meta = json.loads((self.path / "meta.json").read_text())
        except (OSError, ValueError) as exc:
            raise IndexUnusable("meta.json is missing or unreadable") from exc
        meta = self.meta
        try:
            if meta.get("format") != FORMAT:
                raise IndexUnusable(f"format {meta.get('format')!r} is not {FORMAT}")
            # The terms' analyzer (ragsite.analyzers); an index from before analyzers holds seed 004's.
            self.analyzer = str(meta.get("analyzer", SIMPLE))
            if analyzer is not None and self.analyzer != analyzer:
                raise IndexUnusable(f"its terms are the {self.analyzer} analyzer's, not the {analyzer}")
            rows, n_vectors, d = int(meta["rows"]), int(meta["vectors"]), int(meta["dimensions"])
            n_terms, n_postings = int(meta["terms"]), int(meta["postings"])
            self.k1, self.b = float(meta["k1"]), float(meta["b"])
            counts = {
                "row_paragraph": rows,
                "row_document": rows,
                "vector_row": n_vectors,
                "doc_len": rows,
                "indptr": n_terms + 1,
                "vocab_offsets": n_terms + 1,
            }
            for name, (filename, dtype) in ARRAYS.items():
                setattr(self, name, map_exact(self.path / filename, dtype, counts[name]))
            # float16 in the IVF lists' order (vector_at: each vector's place), or float32 in vector order.
            ordered = bool(meta["vectors_ordered"])
            dtype, filename = vector_file(ordered)
            if np.dtype(meta["vector_dtype"]) != dtype:
                raise IndexUnusable(f"vectors of type {meta['vector_dtype']} are not {dtype.str}")
            self.vectors = map_exact(self.path / filename, dtype, n_vectors * d, shape=(n_vectors, d))
            self.vector_at = (
                map_exact(self.path / VECTOR_POSITION_FILE, "<i4", n_vectors) if ordered else None
            )
            self.vocab = map_exact(self.path / "vocab.bin", np.uint8, int(meta["vocab_bytes"]))
            packed_counts = {
                "postings_gaps": int(meta["gap_bytes"]),
                "term_at": n_terms,
                "term_width": n_terms,
                "block_first": int(meta["blocks"]),
                "gap_escape_at": int(meta["gap_escapes"]),
                "gap_escape": int(meta["gap_escapes"]),
                "postings_tf": n_postings,
                "tf_escape_at": int(meta["tf_escapes"]),
                "tf_escape": int(meta["tf_escapes"]),
            }
            self.packed = PackedPostings(
                {
                    name: map_exact(self.path / filename, dtype, packed_counts[name])
                    for name, (filename, dtype) in PACKED_FILES.items()
                },
                self.indptr,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise IndexUnusable(f"meta.json is inconsistent: {exc}") from exc
        # Cheap consistency checks on the ends of the arrays (a torn or foreign file fails here).
        if int(self.indptr[-1]) != n_postings or int(self.vocab_offsets[-1]) != meta["vocab_bytes"]:
            raise IndexUnusable("postings or vocabulary offsets do not close on their files")
        self.size, self.dimensions, self.n_terms = rows, d, n_terms
        # The IVF lists written with the build, when it was large enough to have them.
        self.ivf: IVFLists | None = None
        if "ivf" in meta:
            try:
                info = meta["ivf"]
                nlist, dims, members = (
                    int(info["ivf_nlist"]),
                    int(info["ivf_dimensions"]),
                    int(info["ivf_rows"]),
                )
                arrays = {
                    "ivf_centroids": map_exact(self.path / "ivf_centroids.bin", "<f4", nlist * dims),
                    "ivf_offsets": map_exact(self.path / "ivf_offsets.bin", "<i8", nlist + 1),
                    "ivf_members": map_exact(self.path / "ivf_members.bin", "<i8", members),
                }
                if self.vector_at is not None:  # the vectors in list order (ivf.IVFLists.scan)
                    arrays["ivf_vectors"] = self.vectors
                self.ivf = IVFLists.from_arrays(arrays, info)
            except (KeyError, TypeError, ValueError) as exc:
                raise IndexUnusable(f"the IVF lists are inconsistent: {exc}") from exc
        if self.vector_at is not None and self.ivf is None:
            raise IndexUnusable("the vectors are in the order of IVF lists the index does not have")
        self._norms: np.ndarray | None = None  # every row's `bm25_norms` for the all-rows view, once asked
        # Parts meta.json lists must be there (a missing one: IndexUnusable, rewritten); older indexes: by
        # their files.
        listed = meta.get("parts")
        parts = {
            n
            for n in ("context", "carried", "entries", "entries_context")
            if (n in listed if listed is not None else (self.path / n).is_dir())
        }
        # The BM25 of each row's context ("title › section"), when the build has contexts.
        self.context: MappedIndex | None = None
        if "context" in parts:
            self.context = MappedIndex(self.path / "context")
            if self.context.size != rows:
                raise IndexUnusable("the context postings do not cover the same rows")
        # Each row's carried opening, and the first earlier row it shares text with (itself when none).
        self.carried: MappedIndex | None = None
        self.carried_from: np.ndarray | None = None
        if "carried" in parts:
            self.carried = MappedIndex(self.path / "carried")
            self.carried_from = map_exact(self.path / "carried" / "carried_from.i32", "<i4", rows)
            if self.carried.size != rows:
                raise IndexUnusable("the carried openings do not cover the same rows")
        # A list's, table's or Q/A run's entries (text.entries), rows of their own in row order: their text
        # with their row's context, their vectors, each one's row and its span within the row's text.
        self.entries: MappedIndex | None = None
        self.entry_row: np.ndarray | None = None
        self.entry_span: np.ndarray | None = None
        if "entries" in parts:
            self.entries = MappedIndex(self.path / "entries")
            count = self.entries.size
            self.entry_row = map_exact(self.path / "entries" / "entry_row.i32", "<i4", count)
            self.entry_span = map_exact(
                self.path / "entries" / "entry_span.i32", "<i4", 2 * count, shape=(count, 2)
            )
            if count and (int(self.entry_row[-1]) >= rows or np.any(np.diff(self.entry_row) < 0)):
                raise IndexUnusable("the entries do not name rows of this index in order")
            if "entries_context" in parts:
                self.entries.context = MappedIndex(self.path / "entries_context")
                if self.entries.context.size != count:
                    raise IndexUnusable("the entries' contexts do not cover the same entries")
        self.everyone = View(mask=None, n_docs=rows, length_sum=int(meta["doc_len_sum"]))
        self.every_row = np.ones(
            rows, dtype=bool
        )  # a search's mask when nothing narrows it: shared, read only
        self.every_row.flags.writeable = False
        # A paragraph's windows are consecutive rows of `vectors`: the first vector of each paragraph.
        self.has_vector = np.zeros(rows, dtype=bool)
        if n_vectors:
            self.has_vector[np.asarray(self.vector_row)] = True
            starts = np.flatnonzero(np.diff(self.vector_row, prepend=-1))
            self.window_starts = starts if starts.size < n_vectors else None  # None: one vector a row
        else:
            self.window_starts = None

    # --- vocabulary

    def term_counts(self, query_terms: Iterable[str]) -> tuple[dict[int, int], dict[int, str], int]:
        """The question's known terms as ``{term id: count}`` and ``{term id: spelling}``, and how many terms
        the vocabulary lacks (repeats counted, as ``lexical.BM25Index``); ids asked before are remembered."""
        counts: dict[int, int] = {}
        spelled: dict[int, str] = {}
        unknown = 0
        known = self._term_ids
        for term in query_terms:
            term_id = known.get(term, -1)
            if term_id == -1:
                term_id = self.term_id(term)
                if len(known) < TERMS_REMEMBERED:
                    known[term] = term_id
            if term_id is None:
                unknown += 1
            else:
                counts[term_id] = counts.get(term_id, 0) + 1
                spelled[term_id] = term
        return counts, spelled, unknown

    def term_id(self, term: str) -> int | None:
        """The id of ``term`` (a binary search over the sorted vocabulary), or None."""
        # Through memoryviews of the maps: an item is a Python int and a slice's bytes one call, where
        # numpy's scalars and views cost ~10x that (0.18 ms of a 12-term question at 100,000 rows).
        wanted, vocab, offsets = term.encode("utf-8"), memoryview(self.vocab), memoryview(self.vocab_offsets)
        lo, hi = 0, self.n_terms
        while lo < hi:
            mid = (lo + hi) // 2
            if vocab[offsets[mid] : offsets[mid + 1]].tobytes() < wanted:
                lo = mid + 1
            else:
                hi = mid
        return lo if lo < self.n_terms and vocab[offsets[lo] : offsets[lo + 1]].tobytes() == wanted else None

    # --- lexical

    def view(self, mask: np.ndarray | None, *, cut_carried: bool = False) -> View:
        """Statistics over the rows where ``mask`` is true (None: all rows).

        ``cut_carried``: a row in the view that shares its opening with an earlier row outside it is
        counted, in every statistic and score, as its text less that opening, so nothing of the view
        depends on text only rows outside it hold. The whole carried opening goes, even when
        the row outside ends before a row inside that also overlaps (a cut a little wider than the
        displayed one, stitch.cut_opening: conservative).
        """
        if mask is None:
            return self.everyone
        cut = self.rows_cut(mask) if cut_carried else None
        if cut is None:
            return View(
                mask=mask,
                n_docs=int(np.count_nonzero(mask)),
                length_sum=int(self.doc_len[mask].sum(dtype=np.int64)),
            )
        lengths = np.where(cut, self.doc_len - self.carried.doc_len, self.doc_len)
        return View(
            mask=mask,
            n_docs=int(np.count_nonzero(mask)),
            length_sum=int(lengths[mask].sum(dtype=np.int64)),
            cut=cut,
            doc_len=lengths,
        )

    def rows_cut(self, mask: np.ndarray) -> np.ndarray | None:
        """Rows where ``mask`` is true that share text with an earlier row where it is false; None: none."""
        if self.carried_from is None or mask.all():
            return None
        hidden = np.zeros(self.size + 1, dtype=np.int64)
        np.cumsum(~mask, out=hidden[1:])
        # The rows a row shares text with are carried_from[row] .. row - 1 (stitch.carried_openings).
        cut = mask & (hidden[:-1] > hidden[np.asarray(self.carried_from, dtype=np.int64)])
        return cut if cut.any() else None

    def bm25(self, query_terms: Iterable[str], view: View | None = None) -> tuple[np.ndarray, float]:
        """Seed 004's BM25 of every row for the question's terms, and the question's upper bound.

        Document frequencies, N and avgdl are those of ``view`` (default: every row), so a reader's
        scores do not depend on rows it cannot read. Rows outside the view get scores too (they are
        filtered by the caller). Repeated question terms count with their multiplicity, and the
        upper bound is ``sum idf(q) (k1 + 1)`` over all question terms, a term unknown to the view
        weighing the idf of df = 0 — both exactly as ``lexical.BM25Index``.
        """
        view = view or self.everyone
        norms = self.norms() if view.mask is None else None
        counts, spelled, unknown = self.term_counts(query_terms)
        scores = np.zeros(self.size, dtype=np.float64)
        total = 0.0
        avgdl = view.avgdl
        for term_id in sorted(counts):
            count = counts[term_id]
            lo, hi = int(self.indptr[term_id]), int(self.indptr[term_id + 1])
            docs, tf = self.packed.term(term_id)
            if view.cut is None:
                df = hi - lo if view.mask is None else int(np.count_nonzero(view.mask[docs]))
            else:
                tf = tf.astype(np.float64)
                self._less_carried(spelled[term_id], docs, tf, view.cut)
                df = int(np.count_nonzero(view.mask[docs] & (tf > 0)))
            if df == 0:
                unknown += count  # nowhere in this view: weighs as a term no paragraph holds
                continue
            term_idf = float(idf(view.n_docs, np.asarray([df]))[0])
            total += count * term_idf
            if norms is not None:
                weights = weights_of(tf, np.take(norms, docs), self.k1)
            else:
                dl = (self.doc_len if view.doc_len is None else view.doc_len)[docs]
                weights = bm25_weights(tf, dl, self.k1, self.b, avgdl)
            # A term's postings name each row once, so this is lexical.BM25Index.scores' `+=`;
            # np.add.at is its unbuffered form, 2-5x faster than fancy-index `+=` on 10^5 postings.
            np.add.at(scores, docs, (count * term_idf) * weights)
        if unknown:
            total += unknown * float(idf(view.n_docs, np.zeros(1))[0])
        return scores, total * (self.k1 + 1)

    def _less_carried(self, term: str, docs: np.ndarray, tf: np.ndarray, cut: np.ndarray) -> None:
        """``tf`` (of ``term`` in the rows ``docs``, in place) less its count in the ``cut`` rows' openings.

        An opening's terms are a sub-multiset of its row's (stitch.carried_terms_text), so its rows are
        among ``docs`` and no count goes below zero.
        """
        carried_id = self.carried.term_id(term)
        if carried_id is None:
            return
        rows, carried_tf = self.carried.packed.term(carried_id)
        keep = cut[rows]
        tf[np.searchsorted(docs, rows[keep])] -= carried_tf[keep]

    def norms(self) -> np.ndarray:
        """Every row's `format.bm25_norms` for the all-rows view (computed once, then kept)."""
        if self._norms is None:
            self._norms = bm25_norms(self.doc_len, self.k1, self.b, self.everyone.avgdl)
        return self._norms

    def bm25_index(self) -> BM25Index:
        """These postings as a ``lexical.BM25Index`` (what seed 004's bm25.idx is written from)."""
        offsets = np.asarray(self.vocab_offsets)
        blob = self.vocab.tobytes()
        vocabulary = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(self.n_terms)]
        postings_doc, postings_tf = self.packed.all()
        return BM25Index(
            vocabulary=vocabulary,
            doc_len=self.doc_len,
            indptr=self.indptr,
            postings_doc=postings_doc,
            postings_tf=postings_tf,
            k1=self.k1,
            b=self.b,
        )

    # --- The ranking protocol (collections_app.ranking.Scorable) ---

    def lexical(self, question_terms: list[str], view: View | None = None) -> tuple[np.ndarray, float]:
        """Each row's seed-004 BM25 with its context's share added (`context.lexical_with_context`), and
        the bound; both over the same view of the rows."""
        text, bound = self.bm25(question_terms, view)
        if self.context is None:
            return text, bound
        context_view = None if view is None else self.context.view(view.mask)
        context, context_bound = self.context.bm25(question_terms, context_view)
        return lexical_with_context(text, bound, context, context_bound)

    def row_cosines(
        self,
        vector: np.ndarray | HalfQuery,
        rows: np.ndarray | None = None,
        view: View | None = None,
        known: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> np.ndarray:
        """The pooled cosine of each of ``rows`` (None: every row) with ``vector``; 0 for a row without
        a vector, and for a cut row of ``view`` whose vector may hold its carried opening.

        Builds embed a row from the end of its carried opening (builds.py), so its vector holds no text
        of the rows it shares text with. An index over older vectors (or imported ones) says so in its
        meta; there a row that shares text with a row this reader may not read is ranked on its text
        alone until the collection is rebuilt (which re-embeds it once).

        ``vector`` may come prepared (`vector_codec.half_query`); ``known`` as `cosine_of_rows` takes it.
        """
        cosine = self.cosine(vector) if rows is None else self.cosine_of_rows(vector, rows, known)
        if cosine.size and np.minimum.reduce(cosine) == -np.inf:  # every row with a vector: none to find
            cosine[np.isneginf(cosine)] = 0.0  # a row without a vector has no cosine to offer
        if view is not None and view.cut is not None and not self.meta.get("fresh_vectors"):
            cosine[view.cut if rows is None else view.cut[rows]] = 0.0
        return cosine

    # --- Scoring ---

    def cosine(self, query: np.ndarray | HalfQuery) -> np.ndarray:
        """Cosine of ``query`` (a vector, or one prepared by `vector_codec.half_query`) with every row
        (from its windows, `windows.pool_windows`); -inf for rows without a vector."""
        if self.vector_at is None:  # float32 in vector order: one product
            query = question_vector(query)
            return self._pooled(self.vectors @ query if self.vectors.shape[0] else np.zeros(0, np.float32))
        n_vectors = self.vectors.shape[0]
        per_vector = np.empty(n_vectors, dtype=np.float32)
        listed = np.asarray(self.ivf.members)
        prepared = half_query(query)
        for start in range(0, n_vectors, VECTOR_BLOCK):
            block = half_products(self.vectors[start : start + VECTOR_BLOCK], prepared)
            per_vector[listed[start : start + block.shape[0]]] = block  # list order: each to its place
        return self._pooled(per_vector)

    def cosine_of_rows(self, query: np.ndarray | HalfQuery, rows: np.ndarray, known=None) -> np.ndarray:
        """Exact cosine (pooled as `cosine` pools it) for the given rows only; -inf for a row without a
        vector. ``known``: rows (ascending) whose cosine a probe took, one vector a row, and those
        cosines (`vector_codec.reused`)."""
        rows = np.asarray(rows, dtype=np.int64)
        result = np.full(rows.shape[0], -np.inf, dtype=np.float32)
        if rows.size == 0 or self.vectors.shape[0] == 0:
            return result
        vector_row = np.asarray(self.vector_row)
        if self.window_starts is None and vector_row.size == self.size:
            # One vector a row, every row with one: vector i is row i, each row its only window (what the
            # pooling below gives for one window, without its spans).
            return reused(known, rows, lambda missing: self.products(missing, query))
        # In the map's own type: an int64 key made numpy convert all of vector_row first
        # (0.4 ms a call at 100,000 rows, twice a search).
        keys = rows.astype(vector_row.dtype)
        lo = np.searchsorted(vector_row, keys, side="left")
        hi = np.searchsorted(vector_row, keys, side="right")
        spans = hi - lo
        wanted = np.repeat(lo, spans) + (np.arange(spans.sum()) - np.repeat(np.cumsum(spans) - spans, spans))
        if wanted.size:
            per_vector = self.products(wanted, query)
            np.maximum.at(result, np.repeat(np.arange(rows.shape[0]), spans), per_vector)
            has = spans > 0
            # Each row's first window is the first of its span (a row's windows are consecutive).
            result[has] = lean_to_first(per_vector[(np.cumsum(spans) - spans)[has]], result[has])
        return result

    def products(self, vector_ids: np.ndarray, query: np.ndarray | HalfQuery) -> np.ndarray:
        """Each given vector's (window's, not row's) product with ``query`` (a vector, or one prepared by
        `vector_codec.half_query`), GATHER_BLOCK at a time (one gather's values)."""
        products = np.empty(len(vector_ids), dtype=np.float32)
        if self.vector_at is None:  # float32 vectors: numpy's product
            places, prepared, vector = vector_ids, None, question_vector(query)
        else:
            places, prepared, vector = np.take(self.vector_at, vector_ids), half_query(query), None
        for start in range(0, products.size, GATHER_BLOCK):
            block = places[start : start + GATHER_BLOCK]
            gathered = self.vectors[block]
            products[start : start + block.size] = (
                gathered @ vector if prepared is None else half_products(gathered, prepared)
            )
        return products

    def _pooled(self, per_vector: np.ndarray) -> np.ndarray:
        if per_vector.size == self.size and self.window_starts is None:
            # One vector a row, rows ascending: vector i is row i, so the product is the answer
            # (no -inf fill and scatter over every row).
            return per_vector
        cosine = np.full(self.size, -np.inf, dtype=np.float32)
        if per_vector.size == 0:
            return cosine
        if self.window_starts is None:
            cosine[np.asarray(self.vector_row)] = per_vector
        else:
            cosine[np.asarray(self.vector_row)[self.window_starts]] = pool_windows(
                per_vector, self.window_starts
            )
        return cosine

    def vector_matrix(self) -> np.ndarray:
        """All vectors widened to float32, by vector id (a copy): for building an IVF over them."""
        if self.vector_at is None:
            return np.asarray(self.vectors, dtype=np.float32)
        matrix = np.empty(self.vectors.shape, dtype=np.float32)
        matrix[np.asarray(self.ivf.members)] = self.vectors
        return matrix


__all__ = ["MappedIndex", "View"]
