"""Headings, sections and sentence breaks: where a text's structure lies (pure; used by chunking).

Markdown's ATX headings outside fenced code give sections; a sentence break is where a long
paragraph may be cut, and where a carried opening may start.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator

MAX_SECTION_LENGTH = 300  # a section name, as seed 003 stores it
DEFAULT_SECTION = "Document"  # text before any heading, or a document with none

# ATX heading: up to three spaces, one to six #, then a space or the end of the line. A closing run
# of # is dropped only when a space precedes it, so "# C#" keeps its name (CommonMark's rule).
_ATX = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))??(?:[ \t]+#+)?[ \t]*")
HEADING = _ATX  # a whole line that is an ATX heading: group 1 the "#" run, group 2 its text
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)?")
_NON_WS = re.compile(r"\S")
WORD_START = re.compile(r"(?<!\S)\S")
# Between two sentences: ., ! or ? (a closing quote or bracket may follow), whitespace (group 1),
# then a capital, a digit or an opening quote. "e.g. this" is no break; "Dr. Smith" is taken for one,
# which costs nothing worse than the word start it replaces.
SENTENCE_BREAK = re.compile(r"""[.!?]["')\]]?(\s+)(?=["'(\[]?[A-Z0-9\u00C0-\u00DE])""")
# How far back from a window's end a split inside a paragraph looks for a sentence's end first.
SENTENCE_REACH = 0.25
WHITESPACE = re.compile(r"\s")


def line_spans(text: str) -> list[tuple[int, int]]:
    """(start, end without the line break) of every line."""
    lines = []
    for match in _LINE.finditer(text):
        if match.start() == match.end():  # the empty match after the last line
            break
        content = match.group().rstrip("\r\n")
        lines.append((match.start(), match.start() + len(content)))
    return lines


def heading_lines(text: str) -> Iterator[tuple[int, int, re.Match]]:
    """(start, end, match) of every ATX heading line of ``text``, in order.

    A "#" line inside a fenced code block is code, not a heading, so fences are tracked. The
    match's group 1 is the "#" run (its length is the level) and group 2 the heading's text.
    """
    fence: str | None = None
    for start, end in line_spans(text):
        line = text[start:end]
        fence_match = _FENCE.match(line)
        if fence_match:
            marker = fence_match.group(1)
            if fence is None:
                fence = marker
            elif marker[0] == fence[0] and len(marker) >= len(fence):
                fence = None
            continue
        if fence is None:
            heading = _ATX.fullmatch(line)
            if heading:
                yield start, end, heading


class Outline:
    """The headings of a text (`heading_lines`), and which one is in force at any offset."""

    def __init__(self, text: str) -> None:
        self.starts: list[int] = []  # offset of each heading line
        self.names: list[str] = []
        self.ends: list[int] = []  # end of each heading line's content
        self.line_end_by_marker: dict[int, int] = {}  # offset of a heading's first "#" -> its line end
        for start, end, heading in heading_lines(text):
            name = (heading.group(2) or "").strip()[:MAX_SECTION_LENGTH].rstrip()
            self.starts.append(start)
            self.names.append(name or DEFAULT_SECTION)
            self.ends.append(end)
            self.line_end_by_marker[heading.start(1) + start] = end

    def section_at(self, offset: int) -> str:
        """The heading in force at ``offset``: the last heading line starting at or before it."""
        index = bisect.bisect_right(self.starts, offset) - 1
        return self.names[index] if index >= 0 else DEFAULT_SECTION

    def section_of(self, text: str, start: int, end: int) -> str:
        """The section of the piece ``text[start:end]``: the heading over its first line of text.

        Heading lines at the piece's start are stepped over, so a piece opening "# Handbook / ##
        Leave / text" is filed under "Leave", the heading the text actually sits under.
        """
        position = start
        while position < end and position in self.line_end_by_marker:
            following = next_non_ws(text, self.line_end_by_marker[position])
            if following >= end:
                break
            position = following
        return self.section_at(position)


def next_non_ws(text: str, position: int) -> int:
    match = _NON_WS.search(text, position)
    return match.start() if match else len(text)


def trim(text: str, start: int, end: int) -> tuple[int, int]:
    start = next_non_ws(text, start)
    if start >= end:
        return end, end
    while text[end - 1].isspace():
        end -= 1
    return start, end
