"""Reading OpenDocument text (.odt) and presentations (.odp) with zipfile and lxml.

Pure. No maintained OpenDocument reader is needed for text: ``content.xml`` holds the body, and
its vocabulary is small. In a text document ``text:h`` is a heading of its ``outline-level``,
``text:p`` a paragraph, lists are lines, and ``table:table`` a Markdown table (`tables`). In a
presentation each ``draw:page`` is a slide, headed "Slide 3: <title>" as for PowerPoint, with its
speaker notes; the slide number is its page. Repeated cells and rows (``number-columns-repeated``)
are expanded only up to the table limits, so a sheet of a million repeated empty cells costs
nothing. The package is checked against the zip limits and the XML parsed without entities
(`reading.parse_xml`).
"""

from __future__ import annotations

from collections.abc import Iterator

from .blocks import Block
from .reading import CORRUPT, MAX_TEXT_CHARS, Unreadable, heading_block, open_package, parse_xml, read_member
from .tables import MAX_COLUMNS, markdown_table

TEXT = "urn:oasis:names:tc:opendocument:xmlns:text:1.0"
TABLE = "urn:oasis:names:tc:opendocument:xmlns:table:1.0"
DRAW = "urn:oasis:names:tc:opendocument:xmlns:drawing:1.0"
OFFICE = "urn:oasis:names:tc:opendocument:xmlns:office:1.0"
PRESENTATION = "urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"
MAX_REPEATED_ROWS = 100


def _q(namespace: str, name: str) -> str:
    return f"{{{namespace}}}{name}"


def _content(data: bytes, kind: str):
    package = open_package(data, kind)
    if "content.xml" not in package.namelist():
        raise Unreadable(f"not a readable {kind} (no content.xml)", category=CORRUPT)
    return parse_xml(read_member(package, "content.xml", kind), kind)


def read_odt(data: bytes, _warnings: list[str]) -> list[Block]:
    root = _content(data, "OpenDocument text")
    body = root.find(f"{_q(OFFICE, 'body')}/{_q(OFFICE, 'text')}")
    if body is None:
        raise Unreadable("not a readable OpenDocument text (no text body)", category=CORRUPT)
    blocks: list[str] = []
    _blocks(body, blocks, [0])
    return [Block("\n\n".join(blocks))]


def read_odp(data: bytes, _warnings: list[str]) -> Iterator[Block]:
    root = _content(data, "OpenDocument presentation")
    body = root.find(f"{_q(OFFICE, 'body')}/{_q(OFFICE, 'presentation')}")
    if body is None:
        raise Unreadable("not a readable OpenDocument presentation (no slides)", category=CORRUPT)
    size = 0
    for number, page in enumerate(body.iter(_q(DRAW, "page")), start=1):
        if size > MAX_TEXT_CHARS:
            return
        title, blocks, notes = "", [], []
        for frame in page.iter(_q(DRAW, "frame")):
            in_notes = _in_notes(frame)
            found: list[str] = []
            _blocks(frame, found, [0])
            text = "\n".join(found)
            if in_notes:
                notes.append(text)
            elif not title and frame.get(_q(PRESENTATION, "class")) == "title":
                title = " ".join(text.split())
            elif text:
                blocks.append(text)
        notes_text = "\n".join(n for n in notes if n)
        if notes_text:
            blocks.append("Notes: " + notes_text)
        heading = f"Slide {number}: {title}" if title else f"Slide {number}"
        size += len(heading) + sum(len(b) for b in blocks)
        yield heading_block(heading, "\n\n".join(blocks), number)


def _blocks(element, out: list[str], size: list[int]) -> None:
    """The block-level text under ``element``, in order, into ``out`` (headings as Markdown)."""
    for child in element:
        if size[0] > MAX_TEXT_CHARS:
            return
        tag = child.tag
        if tag == _q(TEXT, "h"):
            line = " ".join(_inline(child).split())
            level = min(max(int(child.get(_q(TEXT, "outline-level"), "1") or 1), 1), 6) if line else 0
            text = f"{'#' * level} {line}" if line else ""
        elif tag == _q(TEXT, "p"):
            text = " ".join(_inline(child).split())
        elif tag == _q(TABLE, "table"):
            text = markdown_table(_table_rows(child))
        elif tag == _q(DRAW, "frame") and _in_notes(child):
            continue
        else:  # lists, sections, frames, text boxes: containers of blocks
            _blocks(child, out, size)
            continue
        if text:
            out.append(text)
            size[0] += len(text)


def _in_notes(element) -> bool:
    return any(ancestor.tag == _q(PRESENTATION, "notes") for ancestor in element.iterancestors())


def _table_rows(table) -> Iterator[list[str]]:
    for row in table.iter(_q(TABLE, "table-row")):
        cells: list[str] = []
        for cell in row:
            if cell.tag not in (_q(TABLE, "table-cell"), _q(TABLE, "covered-table-cell")):
                continue
            repeat = _count(cell.get(_q(TABLE, "number-columns-repeated")))
            text = " ".join(" ".join(_inline(p).split()) for p in cell.iter(_q(TEXT, "p")))
            cells += [text] * min(repeat, MAX_COLUMNS - len(cells))
            if len(cells) >= MAX_COLUMNS:
                break
        for _ in range(min(_count(row.get(_q(TABLE, "number-rows-repeated"))), MAX_REPEATED_ROWS)):
            yield cells
            if not any(cells):
                break


def _count(value: str | None) -> int:
    try:
        return max(1, int(value or 1))
    except ValueError:
        return 1


def _inline(element) -> str:
    """A paragraph's text with ODF's spacing elements: text:s (spaces), text:tab, text:line-break."""
    parts = [element.text or ""]
    for child in element:
        tag = child.tag
        if tag == _q(TEXT, "s"):
            parts.append(" " * min(_count(child.get(_q(TEXT, "c"))), 8))
        elif tag in (_q(TEXT, "tab"), _q(TEXT, "line-break")):
            parts.append(" ")
        elif tag in (_q(TEXT, "note"), _q(OFFICE, "annotation")):
            pass  # footnotes and comments: not part of the sentence they interrupt
        else:
            parts.append(_inline(child))
        parts.append(child.tail or "")
    return "".join(parts)
