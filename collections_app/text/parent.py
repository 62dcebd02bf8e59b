"""The parent strategy's retrieval pieces: small pieces of each section, one entry of a list each (pure).

Issue 28. A section (`sections`, the structure strategy's) is divided into pieces of at most ``size``
characters that never cross it; search scores the pieces and returns the section around a hit
(`stitch.stitch_sections`). Within a section:

* a **table** (every line a Markdown row, `tables`) gives one piece a row, the header row and its rule
  joined to the first row; every row carries the header row as its *entry* (indexed beside it as context);
* a **list** gives one piece an entry: a definition list or an option list (a line at the block's least
  indent followed by deeper lines: a man page's ``-a, --all`` over its description) or list items
  (``-``, ``*``, ``1.``, ``--flag``). An entry longer than ``size`` is cut into windows, and the windows
  after the first carry the entry's term (``-a, --all``) as their entry, so "which flag does X" scores the
  entry's own words and finds its name beside them;
* other paragraphs (prose) are packed whole while they fit, and a longer one is cut at the last line end,
  else sentence end, else whitespace of each window (a hard cut only inside a word longer than ``size``).

A heading line travels with the text under it, as in the structure strategy.
"""

from __future__ import annotations

import re

from .headings import HEADING, SENTENCE_BREAK, Outline, line_spans, trim
from .sections import section_units, sections

MAX_ENTRY_CHARS = 100  # an entry's term as context: a line, not a paragraph
_LIST_ITEM = re.compile(r"[ \t]*(?:[-*+•][ \t]+\S|\d{1,3}[.)][ \t]+\S|--?[A-Za-z0-9?#])")
_TABLE_ROW = re.compile(r"[ \t]*\|")
_TABLE_RULE = re.compile(r"[ \t]*\|?[ \t:|-]*-[ \t:|-]*\|?[ \t]*")

Span = tuple[int, int, str]  # start, end, entry


def cut_parent(text: str, size: int) -> list[Span]:
    """The pieces of ``text`` (see the module), in order: (start, end, entry)."""
    outline = Outline(text)
    spans: list[Span] = []
    for start, end in sections(text, outline):
        prose: tuple[int, int] | None = None  # whole paragraphs packed so far
        for item_start, item_end, entry, is_prose in _items(text, section_units(text, outline, start, end)):
            if is_prose and prose is not None and item_end - prose[0] <= size:
                prose = (prose[0], item_end)
                continue
            if prose is not None:
                spans.extend(_windows(text, *prose, size, ""))
                prose = None
            if is_prose:
                prose = (item_start, item_end)
            else:
                spans.extend(_windows(text, item_start, item_end, size, entry))
        if prose is not None:
            spans.extend(_windows(text, *prose, size, ""))
    return spans


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _term(line: str) -> str:
    """An entry's name: its first line up to a run of two spaces or a tab (an option list's column)."""
    return re.split(r"\s{2,}|\t", line.strip(), maxsplit=1)[0][:MAX_ENTRY_CHARS].rstrip()


def _items(text: str, units: list[tuple[int, int]]):
    """(start, end, entry, is_prose) of each table row, list entry or other paragraph of ``units``."""
    for unit_start, unit_end in units:
        lines = [(unit_start + a, unit_start + b) for a, b in line_spans(text[unit_start:unit_end])]
        lines = [(a, b) for a, b in lines if text[a:b].strip()]
        lead = 0  # heading lines at the top travel with the first item
        while lead < len(lines) - 1 and HEADING.fullmatch(text[lines[lead][0] : lines[lead][1]]):
            lead += 1
        body = lines[lead:]
        texts = [text[a:b] for a, b in body]
        if all(_TABLE_ROW.match(line) for line in texts) and len(body) > 1:
            header = 2 if len(body) > 2 and _TABLE_RULE.fullmatch(texts[1]) else 1
            name = " ".join(cell.strip() for cell in texts[0].strip().strip("|").split("|"))
            name = " ".join(name.split())[:MAX_ENTRY_CHARS]
            rows = [(unit_start, body[header][1])] + [(a, b) for a, b in body[header + 1 :]]
            for a, b in rows:
                yield a, b, name, False
            continue
        base = min(_indent(line) for line in texts)
        starts = [
            i
            for i, line in enumerate(texts)
            if _indent(line) == base
            and (_LIST_ITEM.match(line) or (i + 1 < len(texts) and _indent(texts[i + 1]) > base))
        ]
        if not starts or (len(starts) == 1 and (starts[0] > 0 or not _indent_follows(texts))):
            yield unit_start, unit_end, "", True
            continue
        if starts[0] > 0:  # an opening line before the first entry ("Options:") is a paragraph
            yield unit_start, body[starts[0] - 1][1], "", True
        for number, first in enumerate(starts):
            last = (starts[number + 1] if number + 1 < len(starts) else len(body)) - 1
            begin = unit_start if first == 0 else body[first][0] + _indent(texts[first])
            yield begin, body[last][1], _term(texts[first]), False


def _indent_follows(texts: list[str]) -> bool:
    """A lone entry is one only when deeper lines follow its first (a term over its description)."""
    return len(texts) > 1 and _indent(texts[1]) > _indent(texts[0])


def _windows(text: str, start: int, end: int, size: int, entry: str) -> list[Span]:
    """``text[start:end]`` in pieces of at most ``size`` characters; all but the first carry ``entry``,
    the first too when it is a table row (its header is not in it)."""
    spans: list[Span] = []
    position = start
    while position < end:
        limit = position + size
        if limit >= end:
            cut = end
        else:
            cut = _break(text, position, limit)
        piece_start, piece_end = trim(text, position, cut)
        if piece_end > piece_start:
            spans.append((piece_start, piece_end, entry))
        position = cut
    if spans and not _TABLE_ROW.match(text, start):
        spans[0] = (spans[0][0], spans[0][1], "")  # the entry's first piece names it itself
    return spans


def _break(text: str, position: int, limit: int) -> int:
    """Where a window from ``position`` ends, at most ``limit``: the last line end in its second half,
    else the last sentence end, else the last whitespace, else ``limit`` (inside a long word)."""
    half = position + (limit - position) // 2
    line = text.rfind("\n", half, limit + 1)
    if line > position:
        return line
    best = None
    for match in SENTENCE_BREAK.finditer(text, position, min(len(text), limit + 8)):
        if position < match.start(1) <= limit:
            best = match.start(1)
    if best is not None:
        return best
    for at in range(limit, position, -1):
        if text[at].isspace() and not text[at - 1].isspace():
            return at
    return limit
