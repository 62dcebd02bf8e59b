"""Tables in a PDF page, found in pypdf's layout text and written as Markdown table rows (`tables`).

Pure: no models, no settings. A PDF has no tables, only text placed on a page; pypdf's layout mode
(``extract_text(extraction_mode="layout")``) places each line's text at its horizontal position in
fixed-width characters, so the columns of a table come back as columns of characters. A table here
is a run of at least ``MIN_ROWS`` consecutive layout lines that share at least ``MIN_COLUMNS - 1``
*gutters*: stretches of ``GUTTER`` or more character positions blank on every line of the run, inside
the run's text. Prose does not pass: justified lines (which layout mode spreads with wide word gaps)
have gaps at different places line after line, and a two-column page has one gutter, not two. The
first row is the header (`tables.table_blocks` repeats it in every block of a long table).

The reader keeps its own lines (with their fonts, for headings); a table found here replaces the
lines that hold exactly its text, its whitespace aside, so a table is written only where both
readings agree on what it says. Measured in docs/collections.md (*PDF tables*).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LayoutTable", "find_tables"]

GUTTER = 3  # blank character columns that separate two table columns (a word gap is one or two)
MIN_ROWS = 3  # the header and two rows
MIN_COLUMNS = 3  # two columns side by side are as often a two-column page as a table
MAX_LINE = 2000  # a layout line wider than this (a page of huge width) is not looked at
MAX_LINES = 400  # a page of more layout lines than this (type too small to read) is not looked at
# Dot leaders ("Introduction . . . . 1"): a table of contents or an index lines up like a table.
_LEADER = re.compile(r"(?:\.\s?){4,}")


@dataclass(frozen=True)
class LayoutTable:
    """A table: its rows of cells (the first the header) and its text with all whitespace removed,
    which is how it is matched to the reader's own lines."""

    rows: list[list[str]]
    squeezed: str


def _ink(line: str) -> int:
    """The positions of ``line`` that hold a character, as the bits of an int (bit i: position i)."""
    return int("".join("0" if ch == " " else "1" for ch in reversed(line)) or "0", 2)


def _gutters(lines: list[str], ink: int) -> list[tuple[int, int]]:
    """The stretches of ``GUTTER`` or more positions blank on every line (no bit of ``ink``, the lines'
    inks or-ed), strictly inside the text."""
    left = min(len(line) - len(line.lstrip(" ")) for line in lines)
    right = max(len(line.rstrip()) for line in lines)
    marks = bin(ink)[2:][::-1].ljust(right, "0")  # marks[i] == "1": some line has a character at i
    return [
        (match.start(), match.end())
        for match in re.finditer(f"0{{{GUTTER},}}", marks[:right])
        if match.start() > left
    ]


def _cells(line: str, gutters: list[tuple[int, int]]) -> list[str]:
    cuts = [0] + [end for _start, end in gutters]
    stops = [start for start, _end in gutters] + [len(line)]
    return [line[a:b].strip() for a, b in zip(cuts, stops, strict=True)]


def _is_table(lines: list[str], ink: int) -> list[tuple[int, int]] | None:
    """The run's gutters when it reads as a table, else None."""
    gutters = _gutters(lines, ink)
    if len(gutters) < MIN_COLUMNS - 1:
        return None
    rows = [_cells(line, gutters) for line in lines]
    # Every column holds something in at least half the rows. A sparser one is merged with a
    # neighbour it never shares a row with: a header centred over its column does not overlap the
    # values set beneath it, so layout text gives them columns of their own.
    while True:
        filled = [sum(bool(row[c]) for row in rows) for c in range(len(gutters) + 1)]
        sparse = next((c for c, count in enumerate(filled) if count * 2 < len(rows)), None)
        if sparse is None:
            break
        apart = [
            side
            for side in (sparse + 1, sparse - 1)
            if 0 <= side <= len(gutters) and not any(row[sparse] and row[side] for row in rows)
        ]
        if not apart:
            return None
        gutters = gutters[: min(sparse, apart[0])] + gutters[min(sparse, apart[0]) + 1 :]
        if len(gutters) < MIN_COLUMNS - 1:
            return None
        rows = [_cells(line, gutters) for line in lines]
    # Every row fills two cells or more (a row of one cell is a caption or a wrapped cell: it ends
    # the run).
    if any(sum(bool(cell) for cell in row) < 2 for row in rows):
        return None
    if any(_LEADER.search(line) for line in lines):
        return None
    return gutters


def find_tables(layout: str) -> list[LayoutTable]:
    """The tables of one page's layout text, top to bottom (see the module). A page of more than
    ``MAX_LINES`` lines is not looked at: the search grows each run line by line, so its work goes
    with the square of a table's rows."""
    lines = layout.split("\n")
    if len(lines) > MAX_LINES:
        return []
    usable = [bool(line.strip()) and len(line) <= MAX_LINE for line in lines]
    inks = [_ink(line) if ok else 0 for line, ok in zip(lines, usable, strict=True)]
    found: list[LayoutTable] = []
    at = 0
    while at < len(lines):
        end, ink, gutters = at, 0, None
        # Grow the run line by line while it still reads as a table (the first MIN_ROWS at once).
        while end < len(lines) and usable[end]:
            ink |= inks[end]
            if end + 1 - at >= MIN_ROWS:
                trial = _is_table(lines[at : end + 1], ink)
                if trial is None:
                    break
                gutters = trial
            end += 1
        if gutters is not None:
            block = lines[at:end]
            rows = [_cells(line, gutters) for line in block]
            found.append(LayoutTable(rows, "".join("".join(line.split()) for line in block)))
            at = end
        else:
            at += 1
    return found
