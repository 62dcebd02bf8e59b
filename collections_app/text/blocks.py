"""The carrier of pages: a reader's text in blocks, each from one page (slide, sheet), joined into one text.

Pure: no models, no settings. A reader that knows where its pages are returns `Block`s; `join_blocks`
tidies each, joins them with a blank line and records where each page starts, so a paragraph cut from
the joined text (an exact slice, `chunking`) finds its first and last page with `page_range`. Pages are
numbers from 1: a PDF's page, a presentation's slide, a workbook's sheet in workbook order.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Block", "PageStart", "join_blocks", "page_range", "tidy"]


@dataclass(frozen=True)
class Block:
    """Some text of a document and the page it is on (None: the reader has no pages)."""

    text: str
    page: int | None = None


@dataclass(frozen=True)
class PageStart:
    """Page ``page`` begins at character ``offset`` of the document's joined text."""

    offset: int
    page: int


def tidy(text: str) -> str:
    """Normalise line ends, drop trailing spaces on lines and collapse runs of blank lines."""
    # NUL is dropped because PostgreSQL text columns cannot hold it.
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def join_blocks(blocks: Iterable[Block]) -> tuple[str, tuple[PageStart, ...]]:
    """The blocks' tidied texts joined by blank lines, and where each page's text starts.

    Empty blocks are left out; a page is recorded once, at its first non-empty block. The joined text
    is already tidy (tidying it again changes nothing), so offsets hold in what the chunker reads."""
    parts: list[str] = []
    starts: list[PageStart] = []
    offset = 0
    for block in blocks:
        text = tidy(block.text)
        if not text:
            continue
        if parts:
            offset += 2  # the "\n\n" before this block
        if block.page is not None and (not starts or starts[-1].page != block.page):
            starts.append(PageStart(offset, block.page))
        parts.append(text)
        offset += len(text)
    return "\n\n".join(parts), tuple(starts)


def page_range(
    pages: tuple[PageStart, ...] | list[PageStart], start: int, end: int
) -> tuple[int | None, int | None]:
    """The first and last page of the characters ``start:end``; (None, None) for a text without pages."""
    if not pages:
        return None, None
    offsets = [mark.offset for mark in pages]

    def at(position: int) -> int:
        return pages[max(0, bisect.bisect_right(offsets, position) - 1)].page

    return at(start), at(max(start, end - 1))
