"""A PDF's page furniture: running headers and footers, and printed page numbers, dropped from its lines.

Pure. Works on `pdf`'s lines per page (``{page number: [line, ...]}``), each with ``text`` and
``heading``; headings are never furniture.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Protocol

# Running heads: lines looked at on each edge of a page, and the pages needed to call a line furniture.
EDGE_LINES = 2
FURNITURE_MIN_PAGES = 3


class Line(Protocol):
    """What is read of `pdf`'s line here."""

    text: str
    heading: int


def normal(text: str) -> str:
    """A line as compared: whitespace runs as one space, case folded."""
    return " ".join(text.split()).casefold()


def _furniture_key(text: str) -> str:
    return re.sub(r"\d+", "#", normal(text))


def drop_furniture(lines: dict[int, list[Line]]) -> None:
    """Drop running headers and footers: edge lines repeated on at least half the pages (three or more)."""
    pages = [page for page in lines.values() if page]
    if len(pages) < FURNITURE_MIN_PAGES:
        return
    seen: Counter = Counter()
    for page in pages:
        content = [line for line in page if line.text]
        edges = content[:EDGE_LINES] + content[-EDGE_LINES:]
        seen.update({_furniture_key(line.text) for line in edges if not line.heading})
    needed = max(FURNITURE_MIN_PAGES, math.ceil(len(pages) / 2))
    furniture = {key for key, count in seen.items() if count >= needed and key}
    offsets = _page_number_offsets(lines)
    if not furniture and not offsets:
        return
    for number, page in lines.items():
        content = [line for line in page if line.text]
        edges = {id(line) for line in content[:EDGE_LINES] + content[-EDGE_LINES:]}
        ends = {id(line) for line in _end_lines(page)}
        lines[number] = [
            line
            for line in page
            if line.heading
            or not (
                (id(line) in edges and _furniture_key(line.text) in furniture)
                or (id(line) in ends and _printed_offset(number, line.text) in offsets)
            )
        ]


# A printed page number, alone or at the start or end of a short line: "7", "Chapter 3: Utilities 7",
# "7 User guide" (never "2.1 Syntax", a section's number).
_PRINTED_NUMBER = re.compile(r"^(\d{1,4})(?:\s|$)|\s(\d{1,4})$")
PAGE_LINE_MAX_CHARACTERS = 100


def _end_lines(page: list[Line]) -> list[Line]:
    """The first and the last line of the page's text that are not headings."""
    content = [line for line in page if line.text and not line.heading]
    return content[:1] + content[-1:] if len(content) > 1 else content


def _printed_offset(number: int, text: str) -> int | None:
    """The page's place minus the number printed at the line's edge, or None when it prints none."""
    if len(text) > PAGE_LINE_MAX_CHARACTERS:
        return None
    match = _PRINTED_NUMBER.search(text.strip())
    if match is None:
        return None
    return number - int(match.group(1) or match.group(2))


def _page_number_offsets(lines: dict[int, list[Line]]) -> set[int]:
    """Offsets shared by the first or last lines of three pages or more: their numbers follow the pages,
    so they are page numbers, alone or in a running head that changes with the chapter ("Chapter 3:
    Utilities 7") and so repeats on fewer than half the pages."""
    pages: Counter = Counter()
    for number, page in lines.items():
        found = {_printed_offset(number, line.text) for line in _end_lines(page)}
        pages.update(found - {None})
    return {offset for offset, count in pages.items() if count >= FURNITURE_MIN_PAGES}
