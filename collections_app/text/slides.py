"""Reading PowerPoint decks (.pptx, with python-pptx): one section per slide, the slide number as its page.

Pure. Each slide becomes a Markdown heading, "Slide 3: Quarterly results" (its title placeholder, or
"Slide 3" without one), followed by the text of its shapes in the deck's reading order (tables as
Markdown tables, groups opened to `MAX_GROUP_DEPTH`) and its speaker notes, which often say what the
slide only hints at. The package is checked against the zip limits before python-pptx opens it.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

from .blocks import Block
from .reading import CORRUPT, MAX_TEXT_CHARS, Unreadable, heading_block, open_package
from .tables import markdown_table

MAX_GROUP_DEPTH = 8


def read_pptx(data: bytes, warnings: list[str]) -> Iterator[Block]:
    from pptx import Presentation

    open_package(data, "PowerPoint deck").close()
    try:
        deck = Presentation(io.BytesIO(data))
        slides = list(deck.slides)
    except Exception as exc:  # a damaged package surfaces as zip, XML, key or value errors alike
        raise Unreadable("not a readable PowerPoint deck", category=CORRUPT) from exc
    size = 0
    for number, slide in enumerate(slides, start=1):
        if size > MAX_TEXT_CHARS:
            return
        try:
            title, body = _slide_text(slide)
        except Exception:  # one damaged slide should not cost the rest of the deck
            warnings.append(f"slide {number} could not be read")
            continue
        heading = f"Slide {number}: {title}" if title else f"Slide {number}"
        size += len(heading) + len(body)
        yield heading_block(heading, body, number)


def _slide_text(slide) -> tuple[str, str]:
    title_shape = slide.shapes.title
    title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else ""
    blocks = [text for text in _shapes_text(slide.shapes, skip=title_shape, depth=0) if text]
    if slide.has_notes_slide:
        notes = slide.notes_slide.notes_text_frame
        notes_text = _frame_text(notes) if notes is not None else ""
        if notes_text:
            blocks.append("Notes: " + notes_text)
    return title, "\n\n".join(blocks)


def _shapes_text(shapes, *, skip, depth: int) -> Iterator[str]:
    for shape in shapes:
        if skip is not None and shape.shape_id == skip.shape_id:
            continue
        if getattr(shape, "shape_type", None) == _group_type():
            if depth < MAX_GROUP_DEPTH:
                yield from _shapes_text(shape.shapes, skip=None, depth=depth + 1)
            continue
        if getattr(shape, "has_table", False) and shape.has_table:
            yield markdown_table([cell.text for cell in row.cells] for row in shape.table.rows)
        elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
            yield _frame_text(shape.text_frame)


def _frame_text(frame) -> str:
    """A text frame's paragraphs, one line each (bullets are lines, not run together)."""
    lines = (" ".join(paragraph.text.split()) for paragraph in frame.paragraphs)
    return "\n".join(line for line in lines if line)


def _group_type():
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    return MSO_SHAPE_TYPE.GROUP
