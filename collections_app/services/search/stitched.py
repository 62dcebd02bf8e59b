"""The hits of a search as the answer's paragraphs: widened by their readable neighbours, with texts
read from the store for those rows only, less what they share with rows this search may not read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from ragsite.lexical import terms

from ...index.mapped import MappedIndex
from ...text import stitch as stitching
from ...text.budget import fit
from ...text.stitch import Row, Stitched, stitch, stitch_sections
from ..readers import cut_hidden_copies
from .rows import stored_rows


class Stitching(NamedTuple):
    """The answer's paragraphs, the runs they were made from (in the same order), and every row read
    (by row) as this search may show it."""

    paragraphs: list[dict]
    runs: list[Stitched]
    readable: dict[int, Row]
    cut: bool = False  # the budget left out or cut some of what the search found


def stitched(
    index: MappedIndex,
    mask: np.ndarray,
    hits: list[tuple[int, float]],
    around: int,
    max_chars: int | None = None,
    *,
    per_reader: bool = False,
    sections: bool = False,
    every: bool | None = None,
    citing: np.ndarray | None = None,
    question: str | None = None,
    focus: dict[int, tuple[int, int]] | None = None,
) -> Stitching:
    """Hits widened by their readable neighbours, with texts read from the store for those rows only,
    within ``max_chars`` characters of text in all (`text.budget.fit`; None: no budget).

    A hit's neighbours are the nearest rows of its document this search may use, a row it may not
    use being stepped over as if it did not exist: the answer is the one a
    collection without those rows gives, so no run stops where a hidden paragraph sits. `first` and
    `last` are positions among the rows this search may use (1 = the first readable paragraph).
    `per_reader`: chunk ids count this reader's paragraphs only (`_citable`). `sections` (the parent
    strategy) with ``around`` above 0: each hit comes back with its section's readable rows around it
    (`stitch.stitch_sections`) instead of ``around`` neighbours either side. ``every``: whether every
    row is in ``mask`` (None: read from it). ``citing`` (not per reader): the rows in search before any
    filter, when a paragraph inside a document is switched off; a chunk id's k then counts those rows
    of its document, as export_index numbers docs.jsonl (None: every row counts, k is the stored index).
    The terms of ``question`` (seed 004's) choose the part a hit the budget shortens keeps
    (`text.budget.best_part`); they are read only when the budget cuts.
    """
    if not hits:
        return Stitching([], [], {})
    documents = index.row_document
    if every is None:  # every row readable (the usual case): asked once, not once a step
        every = bool(mask.all())
    sectioned = sections and around > 0
    if sectioned:
        stored = _section_rows(index, mask, [row for row, _score in hits])
    elif around == 0:  # the hits alone
        stored = _read(index, sorted({row for row, _score in hits}))
    else:
        wanted: set[int] = set()
        for row, _score in hits:
            wanted.add(row)
            for step in (-1, 1):
                at, taken = row + step, 0
                while taken < around and 0 <= at < index.size and documents[at] == documents[row]:
                    if mask[at]:
                        wanted.add(at)
                        taken += 1
                    at += step
        stored = _read(index, sorted(wanted))
    names = {found.document: found.name for found in stored.values()}
    readable = {}
    ordered = sorted(stored)
    # The rows' documents in one gather (indexing the mapped array a row at a time costs ~1 us a row).
    of_row = documents[np.asarray(ordered, dtype=np.int64)].tolist() if ordered else []
    for row, document in zip(ordered, of_row, strict=True):
        found = stored[row]
        readable[row] = Row(
            ordinal=row,
            document=document,
            start=found.start,
            end=found.end,
            text=found.text,
            section=found.section,
            index=found.index,
            pages=(found.page_first, found.page_last) if found.page_first is not None else None,
        )
    if not every:
        cut_hidden_copies(index, mask, readable)
    runs = _stitch_readable(mask, hits, readable, around, sectioned, every=every)
    runs = [run for run in runs if run.text.strip()]  # a hit wholly inside a hidden neighbour's copy
    cut, excerpts = False, {}
    if max_chars is not None and sum(len(run.text) for run in runs) > max_chars:  # else `fit` keeps all
        ranked = [row for row, _score in sorted(hits, key=lambda hit: -hit[1])]
        # A hit's best entry, from its span in the paragraph's text to one in the document's.
        centred = {
            row: (stored[row].start + a, stored[row].start + b)
            for row, (a, b) in (focus or {}).items()
            if row in stored
        }
        asked = None if question is None else terms(question)
        fitted = fit(runs, readable, max_chars, ranked, asked, focus=centred)
        runs, readable, cut, excerpts = fitted.runs, fitted.readable, fitted.cut, fitted.excerpts
    at = positions(mask, every=every)
    if per_reader:
        cite = _citable(index, mask, readable)
    elif citing is not None:
        cite = _citable(index, citing, readable)
    else:
        cite = lambda row: readable[row].index  # noqa: E731
    paragraphs = [_paragraph(run, names.get(run.document, ""), readable, at, cite, excerpts) for run in runs]
    return Stitching(paragraphs, runs, readable, cut)


def _read(index: MappedIndex, rows: list[int]) -> dict:
    """The stored rows of index rows ``rows`` (by index row); a row deleted since the index was written is
    absent (the next search maps a new index)."""
    ids = index.row_paragraph[np.asarray(rows, dtype=np.int64)].tolist() if rows else []
    found = {row.id: row for row in stored_rows(ids)}
    return {r: found[pk] for r, pk in zip(rows, ids, strict=True) if pk in found}


# Rows read per side and round while a hit's section is gathered (one query a round for every hit).
SECTION_BATCH = 8


def _section_rows(index: MappedIndex, mask: np.ndarray, hits: list[int]) -> dict:
    """The stored rows a hit's section may take (`stitch.stitch_sections`): the hits, and on each side of
    each the readable rows of its document, read in batches until its section changes or they hold more
    than `stitch.SECTION_CHARS` characters. Only rows this search may use are read."""
    documents = index.row_document
    got = _read(index, sorted(set(hits)))
    # Per hit and side: [next index row to look at, characters gathered]; a side is closed when removed.
    sides = {(hit, step): [hit + step, len(got[hit].text)] for hit in got for step in (-1, 1)}
    while sides:
        batch: dict[tuple[int, int], list[int]] = {}
        for (hit, step), (at, _chars) in sides.items():
            taken: list[int] = []
            while len(taken) < SECTION_BATCH and 0 <= at < index.size and documents[at] == documents[hit]:
                if mask[at]:
                    taken.append(at)
                at += step
            sides[(hit, step)][0] = at
            batch[(hit, step)] = taken
        got.update(_read(index, sorted({r for taken in batch.values() for r in taken} - set(got))))
        for key, taken in batch.items():
            hit, _step = key
            chars, more = sides[key][1], bool(taken)
            for row in taken:
                if row not in got or got[row].section != got[hit].section:
                    more = False
                    break
                chars += 1 + len(got[row].text)
            sides[key][1] = chars
            if not more or chars > stitching.SECTION_CHARS:
                del sides[key]
    return got


def _stitch_readable(
    mask: np.ndarray,
    hits: list[tuple[int, float]],
    readable: dict[int, Row],
    around: int,
    sections: bool,
    *,
    every: bool,
) -> list[Stitched]:
    """`stitch` (or `stitch_sections`) over the readable rows numbered consecutively (their positions
    among the rows this search may use), so two readable rows with hidden ones between them are
    neighbours; the runs come back in row ordinals, `passages` counting readable rows only. ``every``:
    whether every row is in ``mask`` (`stitched` has found out once)."""

    def join(found: list[tuple[int, float]], rows: dict[int, Row]) -> list[Stitched]:
        return stitch_sections(found, rows) if sections else stitch(found, rows, around)

    if every:
        return join([(row, score) for row, score in hits if row in readable], readable)
    counted = np.cumsum(mask)
    dense = {int(counted[row]) - 1: row for row in readable}
    compact = {position: replace(readable[row], ordinal=position) for position, row in dense.items()}
    runs = join([(int(counted[row]) - 1, score) for row, score in hits if row in readable], compact)
    return [replace(run, first=dense[run.first], last=dense[run.last], hit=dense[run.hit]) for run in runs]


def _citable(index: MappedIndex, mask: np.ndarray, readable: dict[int, Row]) -> Callable[[int], int]:
    """A row's k in `<document>#<k>`: its position among the paragraphs of its document in ``mask``, from 0.

    For a per-reader search ``mask`` is what this reader may read, so no id says
    where a hidden one sits; otherwise it is the rows in search, so an id is the one docs.jsonl gives."""
    documents = index.row_document

    def k(row: int) -> int:
        first = row
        while first > 0 and documents[first - 1] == documents[row]:
            first -= 1
        return int(np.count_nonzero(mask[first:row]))

    return k


def positions(mask: np.ndarray, *, every: bool | None = None) -> Callable[[int], int]:
    """A row's position among the rows this search may use (1 = the first), as `first`/`last` give it.

    Every row readable (the usual case; ``every``, else read from ``mask``): a row's position is its
    number; otherwise the readable rows before it are counted, once for all runs.
    """
    if mask.all() if every is None else every:
        return lambda row: row + 1
    counted = np.cumsum(mask)
    return lambda row: int(counted[row])


def _paragraph(
    run: Stitched,
    document: str,
    readable: dict[int, Row],
    at: Callable[[int], int],
    cite: Callable[[int], int],
    excerpts: dict[int, tuple[int, int]],
) -> dict:
    """One paragraph of the answer (`answer.ParagraphOut`), citable by seed 004's chunk id.

    `chunk_id` is `<document>#<k>` of the paragraph the question matched, k its position within
    its document: the id `export_index` writes in docs.jsonl, unchanged by rebuilds of other
    documents. `chunk_ids` names every stored paragraph the text stitches, in document order; `excerpts`
    each of them the budget shortened, with the part kept.
    """
    # The run's stored rows and their ids, each cited once (a hit is one of them).
    if run.first == run.last:  # one row (every run of a search without neighbours)
        ids = {run.first: f"{document}#{cite(run.first)}"} if run.first in readable else {}
    else:
        ids = {o: f"{document}#{cite(o)}" for o in range(run.first, run.last + 1) if o in readable}
    return {
        "text": run.text,
        "score": round(run.score, 6),
        "document": document,
        "section": run.section,
        "passages": run.passages,
        "chunk_id": ids[run.hit] if run.hit in ids else f"{document}#{cite(run.hit)}",
        "chunk_ids": list(ids.values()),
        "first": at(run.first),
        "last": at(run.last),
        "pages": pages_of([readable[o] for o in ids]),
        "excerpts": [
            {"chunk_id": chunk_id, "start": excerpts[o][0], "end": excerpts[o][1]}
            for o, chunk_id in ids.items()
            if o in excerpts
        ]
        if excerpts
        else [],
    }


def pages_of(rows: list[Row]) -> list[int] | None:
    """[first, last] page of the rows' text, as docs.jsonl's "pages" gives it; None when none has pages."""
    paged = [row.pages for row in rows if row.pages is not None]
    if not paged:
        return None
    return [min(first for first, _last in paged), max(last for _first, last in paged)]


def mark_reranked(
    paragraphs: list[dict], runs: list[Stitched], fused: dict[int, float], fused_rank: dict[int, int]
) -> None:
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
    shown = {
        int(r): Row(
            ordinal=int(r),
            document=int(index.row_document[r]),
            start=found[pk].start,
            end=found[pk].end,
            text=found[pk].text,
            section="",
        )
        for r, pk in zip(rows, ids, strict=True)
        if pk in found
    }
    cut_hidden_copies(index, mask, shown)
    return [shown[int(r)].text if int(r) in shown else "" for r in rows]
