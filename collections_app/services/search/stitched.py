"""The hits of a search as the answer's paragraphs: widened by their readable neighbours, with texts
read from the store for those rows only, less what they share with rows this search may not read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ...index.mapped import MappedIndex
from ...text.budget import fit
from ...text.stitch import Row, Stitched, stitch
from ..readers import cut_hidden_copies
from ..rows import stored_rows


class Stitching(NamedTuple):
    """The answer's paragraphs, the runs they were made from (in the same order), and every row read
    (by row) as this search may show it."""

    paragraphs: list[dict]
    runs: list[Stitched]
    readable: dict[int, Row]
    cut: bool = False  # the budget left out or cut some of what the search found


def stitched(index: MappedIndex, mask: np.ndarray, hits: list[tuple[int, float]], around: int,
             max_chars: int | None = None) -> Stitching:
    """Hits widened by their readable neighbours, with texts read from the store for those rows only,
    within ``max_chars`` characters of text in all (`text.budget.fit`; None: no budget).

    `first` and `last` are positions among the rows this search may use (1 = the first readable
    paragraph), never the collection-wide ordinals, whose gaps would show where hidden paragraphs sit.
    """
    if not hits:
        return Stitching([], [], {})
    documents = index.row_document
    wanted: set[int] = set()
    for row, _score in hits:
        wanted.add(row)
        for step in (-1, 1):
            at = row
            for _ in range(around):
                at += step
                if not 0 <= at < index.size or not mask[at] or documents[at] != documents[row]:
                    break
                wanted.add(at)
    rows_sorted = sorted(wanted)
    ids = [int(index.row_paragraph[r]) for r in rows_sorted]
    names: dict[int, str] = {}
    stored = {}
    for found in stored_rows(ids):
        stored[found.id] = found
        names[found.document] = found.name
    readable = {}
    for row, pk in zip(rows_sorted, ids, strict=True):
        if pk not in stored:
            continue  # deleted since the index was written; the next search maps a new one
        found = stored[pk]
        readable[row] = Row(ordinal=row, document=int(documents[row]), start=found.start, end=found.end,
                            text=found.text, section=found.section, index=found.index,
                            pages=(found.page_first, found.page_last) if found.page_first is not None else None)
    cut_hidden_copies(index, mask, readable)
    runs = stitch([(row, score) for row, score in hits if row in readable], readable, around)
    runs = [run for run in runs if run.text.strip()]  # a hit wholly inside a hidden neighbour's copy
    cut = False
    if max_chars is not None:
        fitted = fit(runs, readable, max_chars)
        runs, readable, cut = fitted.runs, fitted.readable, fitted.cut
    at = positions(mask)
    paragraphs = [_paragraph(run, names.get(run.document, ""), readable, at) for run in runs]
    return Stitching(paragraphs, runs, readable, cut)


def positions(mask: np.ndarray) -> Callable[[int], int]:
    """A row's position among the rows this search may use (1 = the first), as `first`/`last` give it.

    Every row readable (the usual case): a row's position is its number; otherwise the readable rows
    before it are counted, once for all runs.
    """
    if mask.all():
        return lambda row: row + 1
    counted = np.cumsum(mask)
    return lambda row: int(counted[row])


def _paragraph(run: Stitched, document: str, readable: dict[int, Row], at: Callable[[int], int]) -> dict:
    """One paragraph of the answer (`answer.ParagraphOut`), citable by seed 004's chunk id.

    `chunk_id` is `<document>#<k>` of the paragraph the question matched, k its position within
    its document: the id `export_index` writes in docs.jsonl, unchanged by rebuilds of other
    documents. `chunk_ids` names every stored paragraph the text stitches, in document order.
    """
    return {
        "text": run.text,
        "score": round(run.score, 6),
        "document": document,
        "section": run.section,
        "passages": run.passages,
        "chunk_id": f"{document}#{readable[run.hit].index}",
        "chunk_ids": [f"{document}#{readable[o].index}" for o in range(run.first, run.last + 1)],
        "first": at(run.first),
        "last": at(run.last),
        "pages": pages_of([readable[o] for o in range(run.first, run.last + 1)]),
    }


def pages_of(rows: list[Row]) -> list[int] | None:
    """[first, last] page of the rows' text, as docs.jsonl's "pages" gives it; None when none has pages."""
    paged = [row.pages for row in rows if row.pages is not None]
    if not paged:
        return None
    return [min(first for first, _last in paged), max(last for _first, last in paged)]


def mark_reranked(paragraphs: list[dict], runs: list[Stitched], fused: dict[int, float],
                  fused_rank: dict[int, int]) -> None:
    """Each paragraph's fused score (``fused``: by hit row) and fused position beside the reranker's
    score that ordered it."""
    for paragraph, run in zip(paragraphs, runs, strict=True):
        hits = [row for row in range(run.first, run.last + 1) if row in fused]
        paragraph["rerank_score"] = paragraph["score"]
        paragraph["score"] = round(max(fused[row] for row in hits), 6)
        paragraph["fused_rank"] = min(fused_rank[row] for row in hits)


def shown_texts(index: MappedIndex, rows: np.ndarray, mask: np.ndarray) -> list[str]:
    """The texts of some rows as this search may show them (less what they share with rows it may not
    read, readers.cut_hidden_copies), in their order: what the reranker reads, so it orders on
    nothing the reader could not be shown."""
    ids = [int(index.row_paragraph[r]) for r in rows]
    found = {row.id: row for row in stored_rows(ids)}
    shown = {int(r): Row(ordinal=int(r), document=int(index.row_document[r]), start=found[pk].start,
                         end=found[pk].end, text=found[pk].text, section="")
             for r, pk in zip(rows, ids, strict=True) if pk in found}
    cut_hidden_copies(index, mask, shown)
    return [shown[int(r)].text if int(r) in shown else "" for r in rows]
