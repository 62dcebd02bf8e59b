"""The in-memory index a measurement ranks: what a build would store and a search loads, held in memory
(`ScratchIndex`), for measure's variants (`scratch_index`) and the known answers' check
(`services.known_answers.scratch`).

With entries (ENTRIES), it holds them as a build's index does (`services.indexes.entries`): each entry of a
list, table or Q/A run (`text.entries.entry_spans` of its row's fresh text) is a row of its own, with its
BM25 over its text, its row's context and one vector (`add_entries`). Ranking then scores a row by itself
and its best entry in the one ranking step every search takes (`ranking.entry_scores`), so what a
measurement finds is what a search of a collection built with entries finds.

Pure: no Django models, no settings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ragsite.analyzers import SIMPLE, terms_of
from ragsite.lexical import BM25Index

from .text.context import lexical_with_context
from .text.stitch import Row
from .text.windows import pool_windows


@dataclass
class ScratchIndex:
    """An index in memory: what a build would have stored, and what search loads (a measure variant's, or
    the rows the known answers are asked of)."""

    rows: list[Row]  # ordinal i is row i; document = position of the document in the corpus
    bm25: BM25Index
    matrix: np.ndarray | None  # (n, d) unit rows; None when lexical only
    # With long paragraphs stored as several windows: the row of each matrix row (ascending), and a
    # row's cosine is pooled from its windows as search pools it (windows.pool_windows). None: one
    # matrix row per row.
    window_row: np.ndarray | None = None
    context_bm25: BM25Index | None = None  # over each row's "title › section", as a build indexes it
    analyzer: str = SIMPLE  # whose terms bm25 and context_bm25 hold (ragsite.analyzers), as a build's index
    # With entries (`add_entries`), as a build's index holds them (`ranking.Scorable`): an index whose rows
    # are the entries, each entry's row (ascending) and its (start, end) in that row's text. None: none.
    entries: ScratchIndex | None = None
    entry_row: np.ndarray | None = None
    entry_span: np.ndarray | None = None

    @property
    def readable(self) -> dict[int, Row]:
        return {row.ordinal: row for row in self.rows}

    # --- The ranking protocol (collections_app.ranking.Scorable); a scratch index has no views.

    @property
    def size(self) -> int:
        return len(self.rows)

    def lexical(self, question_terms: list[str], view=None) -> tuple[np.ndarray, float]:
        """Each row's BM25 with its context's share (`context.lexical_with_context`), and the bound."""
        context = self.context_bm25
        return lexical_with_context(
            self.bm25.scores(question_terms),
            self.bm25.upper_bound(question_terms),
            context.scores(question_terms) if context is not None else None,
            context.upper_bound(question_terms) if context is not None else 0.0,
        )

    def row_cosines(self, vector: np.ndarray, rows: np.ndarray | None = None, view=None) -> np.ndarray:
        """Each row's cosine, pooled from its windows as search pools them; 0 for a row without one."""
        cosine = self.matrix @ np.asarray(vector, dtype=np.float32)
        if self.window_row is not None:
            pooled = np.full(len(self.rows), -np.inf, dtype=np.float32)
            starts = np.flatnonzero(np.diff(self.window_row, prepend=-1))
            pooled[self.window_row[starts]] = pool_windows(cosine, starts)
            cosine = np.where(np.isneginf(pooled), 0.0, pooled).astype(np.float32)
        return cosine if rows is None else cosine[rows]


def add_entries(
    index: ScratchIndex,
    contexts: Sequence[str],
    spans: Sequence[Sequence[tuple[int, int]]],
    vectors: Sequence[np.ndarray | None],
) -> None:
    """Give ``index`` its rows' entries, as a build's index writer gives a mapped index its entries part
    (`services.indexes.entries`): ``spans[i]`` are row i's entries (`text.entries.entry_spans` of its fresh
    text) and ``vectors[i]`` their vectors, one matrix row an entry as the build stored them (None: the row
    has none). Each entry is a row of ``index.entries``: its BM25 over its text, its row's context (its
    title and section, ``contexts[i]``), its vector."""
    rows, texts, entry_contexts, blocks, owners, bounds = [], [], [], [], [], []
    for number, (row, row_spans, block) in enumerate(zip(index.rows, spans, vectors, strict=True)):
        if block is None or not row_spans:
            continue
        for a, b in row_spans:
            text = row.text[a:b]
            rows.append(
                Row(
                    ordinal=len(rows),
                    document=row.document,
                    start=row.start + a,
                    end=row.start + b,
                    text=text,
                    section=row.section,
                    index=row.index,
                )
            )
            texts.append(text)
            entry_contexts.append(contexts[number])
            owners.append(number)
            bounds.append((a, b))
        blocks.append(np.asarray(block, dtype=np.float32))
    if not rows:
        return
    analyzer = index.analyzer
    context = BM25Index.from_terms(terms_of(analyzer, entry_contexts)) if any(entry_contexts) else None
    index.entries = ScratchIndex(
        rows=rows,
        bm25=BM25Index.from_terms(terms_of(analyzer, texts)),
        matrix=np.concatenate(blocks),
        context_bm25=context,
        analyzer=analyzer,
    )
    index.entry_row = np.asarray(owners, dtype=np.int64)
    index.entry_span = np.asarray(bounds, dtype=np.int64).reshape(-1, 2)
