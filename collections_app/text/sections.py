"""A document's sections and the paragraphs of each (pure; the structure and parent strategies share them).

A section runs from one heading line to the next; a heading with nothing under it is carried into the
next section, so a title line does not become a paragraph by itself. A section's units are its
blank-line separated paragraphs, a leading run of heading lines joined to the paragraph under it.
"""

from __future__ import annotations

from collections.abc import Sequence

from .headings import Outline, line_spans, next_non_ws


def sections_of_pieces(texts: Sequence[str]) -> list[str]:
    """The section of each piece of one document, in order, when the document's own text is not at hand
    (an imported index: docs.jsonl holds neither sections nor offsets). The pieces laid one after the
    other as paragraphs give back every heading line they hold, and so the heading over each."""
    laid, starts = "", []
    for text in texts:
        laid += "\n\n" if laid else ""
        starts.append(len(laid))
        laid += text
    outline = Outline(laid)
    return [outline.section_of(laid, at, at + len(text)) for at, text in zip(starts, texts, strict=True)]


def section_units(text: str, outline: Outline, start: int, end: int) -> list[tuple[int, int]]:
    """The paragraphs of the section ``text[start:end]``, a heading joined to the text under it."""
    units = paragraphs(text, start, end)
    # A heading belongs with the text under it: a unit that is nothing but a heading line (or a
    # run of them, "# Handbook" then "## Leave") is joined to the paragraph that follows.
    lead = 0
    while lead < len(units) - 1 and outline.line_end_by_marker.get(units[lead][0], -1) >= units[lead][1]:
        lead += 1
    if lead:
        units[lead] = (units[0][0], units[lead][1])
        del units[:lead]
    return units


def sections(text: str, outline: Outline) -> list[tuple[int, int]]:
    """(start, end) of each section. A heading with nothing under it opens no section of its own:
    it is carried into the next one, so a title line does not become a paragraph by itself."""
    bounds = [0, *outline.starts, len(text)]
    sections: list[tuple[int, int]] = []
    carried: int | None = None
    for index in range(len(bounds) - 1):
        start, end = bounds[index], bounds[index + 1]
        if start == end:
            continue
        if carried is not None:
            start, carried = carried, None
        is_heading = index > 0
        body_start = outline.ends[index - 1] if is_heading else start
        has_body = next_non_ws(text, body_start) < end
        if is_heading and not has_body and end < len(text):
            carried = start
            continue
        if has_body or is_heading:
            sections.append((start, end))
    return sections


def paragraphs(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Trimmed spans of the blank-line separated blocks in ``text[start:end]``."""
    blocks: list[tuple[int, int]] = []
    block_start: int | None = None
    block_end = start
    for line_start, line_end in line_spans(text[start:end]):
        line_start += start
        line_end += start
        line = text[line_start:line_end]
        if line.strip():
            if block_start is None:
                block_start = line_start + (len(line) - len(line.lstrip()))
            block_end = line_start + len(line.rstrip())
        elif block_start is not None:
            blocks.append((block_start, block_end))
            block_start = None
    if block_start is not None:
        blocks.append((block_start, block_end))
    return blocks
