"""Tables written as Markdown table rows, so that a row's header travels with each of its values.

Pure. A table becomes one or more Markdown tables separated by blank lines, each opening with the
header row: a table longer than `BLOCK_CHARS` is divided between rows, never inside one, and every
block repeats the header, so a block read alone (a paragraph of the index, a search answer) still
says what each value is. `BLOCK_CHARS` is below the structure strategy's default size (1,800), so at
the defaults each block fits a paragraph whole; the chunker divides a longer block only between rows
(`chunking`). Cells are bounded (`MAX_CELL_CHARS`), and so are columns (`MAX_COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

BLOCK_CHARS = 1500
MAX_CELL_CHARS = 500
MAX_COLUMNS = 64


def cell_text(value: object) -> str:
    """A cell as one line of Markdown: whitespace collapsed, pipes escaped, cut at MAX_CELL_CHARS."""
    if value is None:
        return ""
    text = " ".join(str(value).split())
    if len(text) > MAX_CELL_CHARS:
        text = text[: MAX_CELL_CHARS - 1].rstrip() + "…"
    return text.replace("|", "\\|")


def row_line(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def table_blocks(rows: Iterable[Sequence[object]], *, block_chars: int = BLOCK_CHARS) -> Iterator[str]:
    """The rows of a table as Markdown tables of about ``block_chars`` each, the first row as header.

    Empty rows are skipped; rows are padded to the widest row seen so far so the Markdown stays a
    table. A table of one row is its header alone. Rows are read lazily, so a long sheet is never
    held whole."""
    header: list[str] | None = None
    lines: list[str] = []
    size = 0
    head_text = ""
    for raw in rows:
        cells = [cell_text(value) for value in list(raw)[:MAX_COLUMNS]]
        while cells and not cells[-1]:
            cells.pop()
        if not any(cells):
            continue
        if header is None:
            header = cells
            head_text = row_line(header) + "\n" + row_line(["---"] * len(header))
            continue
        if len(cells) > len(header):  # a row wider than the header: widen it with empty names
            header += [""] * (len(cells) - len(header))
            head_text = row_line(header) + "\n" + row_line(["---"] * len(header))
        cells += [""] * (len(header) - len(cells))
        line = row_line(cells)
        if lines and size + len(line) + 1 > block_chars:
            yield head_text + "\n" + "\n".join(lines)
            lines = []
        if not lines:
            size = len(head_text)
        lines.append(line)
        size += len(line) + 1
    if header is None:
        return
    yield head_text + "\n" + "\n".join(lines) if lines else row_line(header)


def markdown_table(rows: Iterable[Sequence[object]], *, block_chars: int = BLOCK_CHARS) -> str:
    """`table_blocks` joined by blank lines: the text of a whole table."""
    return "\n\n".join(table_blocks(rows, block_chars=block_chars))
