"""Reading a PDF into page blocks: text layer, paragraphs, headings, running heads dropped, scans OCR'd.

Pure: no models, no settings. What pypdf gives is a page's lines; this module adds what a reader of the
page sees and the chunker needs:

- **Paragraphs**: a vertical gap well above the page's usual line spacing starts a new paragraph (a
  blank line), so the `structure` strategy packs whole paragraphs instead of cutting a page's run of
  lines wherever its size runs out.
- **Headings** as Markdown ``#`` lines: the document's outline (bookmarks) when it has one, each title
  found on its destination page; otherwise lines set clearly larger than the body text, or in bold
  where the body is not, numbered by size (largest ``#``).
- **Running headers and footers**: a line at the top or bottom of at least half the pages (three or
  more), compared with its digits ignored, is page furniture and is dropped; so is an edge line that
  prints its page's number (the same offset from the page's place on three pages or more), alone or
  in a running head that changes with the chapter.
- **OCR'd pages** keep Tesseract's blank lines as paragraph breaks, except between a line that does
  not end a sentence and one that starts in lower case (one sentence cut into two blocks).
- **Tables** as Markdown table rows, where pypdf's layout text lines a page's text up in columns
  (`pdf_tables`); a program listing set in a fixed-pitch font stays text.
- **Scans**: a page with no usable text layer is rendered and read by OCR (`ocr`), when OCR options
  are given and Tesseract is installed; the other pages keep their own text.

Failures are `PdfProblem` with a ``kind`` the extractor turns into its refusal vocabulary.
"""

from __future__ import annotations

import io
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from .blocks import Block
from .ocr import NotInstalled, OcrOptions, render_pdf_pages
from .pdf_furniture import drop_furniture
from .pdf_furniture import normal as _normal
from .pdf_tables import find_tables
from .tables import markdown_table

__all__ = ["PdfProblem", "PdfText", "read_pdf"]

# A page with fewer letters and digits than this in its text layer is treated as a scan: a page
# number stamped on an image is not a text layer anyone could search.
USABLE_CHARACTERS = 4
# How much larger than the body a line must be set to count as a heading, and how long it may be.
HEADING_RATIO = 1.15
HEADING_MAX_CHARACTERS = 150
# A gap this many times the page's usual line spacing separates paragraphs.
PARAGRAPH_GAP = 1.4
# Fixed-pitch fonts by name (bit 1 of a descriptor's /Flags says so too, when a PDF sets it).
MONO_NAMES = ("mono", "nimbusmon", "courier", "consol", "cmtt", "code")


class PdfProblem(Exception):
    """``kind``: "encrypted", "corrupt", "empty" (no pages), "no_text" or "needs_ocr"."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason


@dataclass
class PdfText:
    blocks: list[Block]
    warnings: list[str] = field(default_factory=list)
    ocr_pages: int = 0


@dataclass
class _Line:
    text: str
    size: float = 0.0
    bold: bool = False
    y: float | None = None
    heading: int = 0  # Markdown level once decided
    gap_before: bool = False  # a paragraph starts here
    mono: bool = False  # set wholly in a fixed-pitch font
    table: bool = False  # the text is a Markdown table (`pdf_tables`)


def read_pdf(
    data: bytes, *, ocr: OcrOptions | None, on_ocr_page: Callable[[int], None] | None = None
) -> PdfText:
    """The PDF's pages as blocks. ``ocr`` None: scanned pages are not read (reported, or refused).
    ``on_ocr_page(n)`` is told before the n-th page is OCR'd."""
    reader, pages = _open(data)
    if not pages:
        raise PdfProblem("empty", "no pages")
    result = PdfText(blocks=[])
    lines: dict[int, list[_Line]] = {}
    unreadable: list[int] = []
    for number, page in enumerate(pages, start=1):
        try:
            lines[number] = _tables(page, _page_lines(page))
        except Exception:
            # One broken page should not cost the rest of the document.
            result.warnings.append(f"page {number} could not be read")
            lines[number] = []
            continue
        if sum(ch.isalnum() for line in lines[number] for ch in line.text) < USABLE_CHARACTERS:
            unreadable.append(number)
    outline = _outline(reader)
    if outline:
        _headings_from_outline(lines, outline)
    else:
        _headings_from_fonts(lines)
    for number in unreadable:
        lines[number] = []
    _ocr(data, unreadable, lines, ocr, result, on_ocr_page)
    drop_furniture(lines)
    for number in range(1, len(pages) + 1):
        result.blocks.append(Block(_page_text(lines[number]), number))
    if not any(block.text.strip() for block in result.blocks):
        raise PdfProblem("no_text", "no text")
    return result


def _open(data: bytes):
    from pypdf import PdfReader

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception as exc:  # an unsupported algorithm is as closed to us as a password
                raise PdfProblem("encrypted", "encrypted") from exc
            if not opened:
                raise PdfProblem("encrypted", "encrypted")
        return reader, list(reader.pages)
    except PdfProblem:
        raise
    except Exception as exc:
        # Damaged input surfaces from deep inside pypdf as almost any exception type.
        raise PdfProblem("corrupt", "not a readable PDF") from exc


# --- One page's lines ----------------------------------------------------------------------------


def _multiply(first: list[float], second: list[float]) -> list[float]:
    a, b, c, d, e, f = first
    g, h, i, j, k, m = second
    return [a * g + b * i, a * h + b * j, c * g + d * i, c * h + d * j, e * g + f * i + k, e * h + f * j + m]


def _font_facts(font) -> tuple[str, float, int]:
    """A font's name (lowercased), weight and descriptor flags; nothing known for a damaged one."""
    if not font:
        return "", 0.0, 0
    try:
        name = str(font.get("/BaseFont", "")).lower()
        descriptor = font.get("/FontDescriptor")
        descriptor = descriptor.get_object() if descriptor is not None else {}
        return name, float(descriptor.get("/FontWeight", 0) or 0), int(descriptor.get("/Flags", 0) or 0)
    except Exception:
        return "", 0.0, 0


def _is_bold(font) -> bool:
    name, weight, flags = _font_facts(font)
    return (
        any(word in name for word in ("bold", "black", "heavy", "semibold"))
        or weight >= 600
        or bool(flags & (1 << 18))
    )


def _is_mono(font) -> bool:
    name, _weight, flags = _font_facts(font)
    return bool(flags & 1) or any(word in name for word in MONO_NAMES)


def _page_lines(page) -> list[_Line]:
    """The page's lines as pypdf lays them out, each with the size, weight and height it is set at."""
    runs: list[tuple[str, float, bool, float, bool]] = []

    def visit(text, cm, tm, font, size) -> None:
        if text:
            matrix = _multiply(list(tm), list(cm))
            size = abs(size) * math.hypot(matrix[2], matrix[3])
            runs.append((text, size, _is_bold(font), matrix[5], _is_mono(font)))

    text = page.extract_text(visitor_text=visit) or ""
    if "".join(run[0] for run in runs) != text:
        # The visitor did not see the text as returned: keep the text, without font facts.
        return [_Line(line) for line in text.splitlines()]
    lines: list[_Line] = []
    weights: Counter = Counter()
    current = ""
    first_y: float | None = None
    bold_chars = mono_chars = 0
    for run_text, size, bold, y, mono in runs:
        for piece in re.split(r"(\n)", run_text):
            if piece == "\n":
                lines.append(_line(current, weights, bold_chars, first_y, mono_chars))
                current, weights, bold_chars, mono_chars, first_y = "", Counter(), 0, 0, None
            elif piece:
                if first_y is None and piece.strip():
                    first_y = y
                current += piece
                count = sum(not ch.isspace() for ch in piece)
                weights[round(size, 1)] += count
                bold_chars += count if bold else 0
                mono_chars += count if mono else 0
    if current:
        lines.append(_line(current, weights, bold_chars, first_y, mono_chars))
    return lines


def _line(text: str, weights: Counter, bold_chars: int, y: float | None, mono_chars: int = 0) -> _Line:
    total = sum(weights.values())
    size = weights.most_common(1)[0][0] if weights else 0.0
    return _Line(
        text=text.strip(),
        size=size,
        bold=bool(total) and bold_chars == total,
        y=y,
        mono=bool(total) and mono_chars == total,
    )


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _tables(page, lines: list[_Line]) -> list[_Line]:
    """``lines`` with each table the layout text shows (`pdf_tables`) in place of the lines holding
    exactly its text, as one Markdown table line; lines set in a fixed-pitch font (a program listing,
    a hex dump) are left as they are."""
    try:
        tables = find_tables(page.extract_text(extraction_mode="layout") or "")
    except Exception:  # layout mode fails on pages plain mode reads: keep the lines
        return lines
    for table in tables:
        squeezed = [_squeezed(line.text) for line in lines]
        for first in range(len(lines)):
            if not squeezed[first] or not table.squeezed.startswith(squeezed[first]):
                continue
            text, last = "", first
            while last < len(lines) and len(text) < len(table.squeezed):
                text += squeezed[last]
                last += 1
            if text != table.squeezed or any(line.mono or line.table for line in lines[first:last]):
                continue
            lines[first:last] = [
                _Line(
                    markdown_table(table.rows),
                    size=lines[first].size,
                    y=lines[first].y,
                    gap_before=True,
                    table=True,
                )
            ]
            if first + 1 < len(lines):
                lines[first + 1].gap_before = True
            break
    return lines


# --- Headings ------------------------------------------------------------------------------------


def _outline(reader) -> list[tuple[str, int, int]]:
    """(title, page number, depth) of each outline entry that points at a page, in outline order."""
    found: list[tuple[str, int, int]] = []

    def walk(items, depth: int) -> None:
        for item in items:
            if isinstance(item, list):
                walk(item, depth + 1)
                continue
            try:
                number = reader.get_destination_page_number(item)
                title = " ".join(str(item.title or "").split())
            except Exception:
                continue
            if title and number is not None and number >= 0:
                found.append((title, number + 1, depth))

    try:
        walk(reader.outline, 0)
    except Exception:  # a damaged outline is no outline
        return []
    return found


def _headings_from_outline(lines: dict[int, list[_Line]], outline: list[tuple[str, int, int]]) -> None:
    for title, number, depth in outline:
        page = lines.get(number)
        if page is None:
            continue
        level = min(depth + 1, 6)
        wanted = _normal(title)
        match = next((line for line in page if not line.heading and _normal(line.text) == wanted), None)
        if match is not None:
            match.heading = level
        else:
            # The title is not a line of the page (set in pieces, or not printed): it heads the page.
            page.insert(0, _Line(text=title, heading=level))


def _headings_from_fonts(lines: dict[int, list[_Line]]) -> None:
    sizes: Counter = Counter()
    bold: Counter = Counter()
    for page in lines.values():
        for line in page:
            count = sum(not ch.isspace() for ch in line.text)
            sizes[line.size] += count
            bold[line.bold] += count
    if not sizes:
        return
    body = sizes.most_common(1)[0][0]
    body_bold = bold.most_common(1)[0][0]
    if body <= 0:
        return

    def candidate(line: _Line) -> bool:
        text = line.text
        if line.table or not text or len(text) > HEADING_MAX_CHARACTERS:
            return False
        if not any(ch.isalpha() for ch in text):
            return False
        return line.size >= body * HEADING_RATIO or (line.bold and not body_bold and line.size >= body * 0.95)

    marked = [line for page in lines.values() for line in page if candidate(line)]
    # Larger type, higher level; bold at body size is the lowest.
    steps = sorted({round(line.size) for line in marked if line.size >= body * HEADING_RATIO}, reverse=True)[
        :5
    ]
    for line in marked:
        rank = steps.index(round(line.size)) + 1 if round(line.size) in steps else len(steps) + 1
        line.heading = min(rank, 6)


# --- Scans, furniture, and the page's text -------------------------------------------------------


def _ocr(
    data: bytes,
    numbers: list[int],
    lines: dict[int, list[_Line]],
    options: OcrOptions | None,
    result: PdfText,
    on_page,
) -> None:
    if not numbers:
        return
    has_text = any(lines[n] for n in lines if n not in numbers)
    if options is None:
        for number in numbers:
            result.warnings.append(f"page {number} has no text layer")
        return
    try:
        read = render_pdf_pages(data, numbers, options, on_page=on_page)
    except NotInstalled as exc:
        if not has_text:
            raise PdfProblem("needs_ocr", str(exc)) from exc
        result.warnings += [f"page {n} has no text layer (needs OCR, not installed)" for n in numbers]
        return
    except MemoryError:
        raise
    except Exception:
        result.warnings += [f"page {n} could not be rendered for OCR" for n in numbers]
        return
    for number in numbers:
        page = read.get(number)
        text = page.text.strip() if page else ""
        if text:
            result.ocr_pages += 1
            lines[number] = ocr_lines(text)
        elif page is not None and page.problem:
            result.warnings.append(f"page {number} was not read by OCR: {page.problem}")
        else:
            result.warnings.append(f"page {number} has no text layer, and OCR read nothing on it")


# A line ending like a sentence or a label: a blank line after it, in OCR output, is a paragraph break.
_CLOSED = re.compile(r"[.!?:;)\]\"'»”]$")


def ocr_lines(text: str) -> list[_Line]:
    """Tesseract's text as lines. It separates the blocks it finds with blank lines, and sometimes cuts
    one sentence into two blocks ("…on level 3" / "is retired on 30 June"): a blank line between a line
    that does not end a sentence and one that starts in lower case is no paragraph break."""
    out: list[_Line] = []
    gap = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            gap = True
            continue
        continues = out and not _CLOSED.search(out[-1].text) and line[0].islower()
        out.append(_Line(line, gap_before=gap and not continues))
        gap = False
    return out


def _paragraph_gaps(page: list[_Line]) -> None:
    """Mark the lines that start a paragraph: after a vertical gap well above the page's usual spacing."""
    steps = [
        previous.y - line.y
        for previous, line in zip(page, page[1:], strict=False)
        if previous.y is not None and line.y is not None and previous.y > line.y
    ]
    if len(steps) < 2:
        return
    usual = sorted(steps)[(len(steps) - 1) // 2]  # the lower median: short pages have few steps
    for previous, line in zip(page, page[1:], strict=False):
        if previous.y is None or line.y is None:
            continue
        step = previous.y - line.y
        # A line above the previous one: a new column or a block placed out of order.
        if step > usual * PARAGRAPH_GAP or step < 0:
            line.gap_before = True


def _page_text(page: list[_Line]) -> str:
    _paragraph_gaps(page)
    out: list[str] = []
    last_heading = 0  # the level of the line just written, when it was a heading
    for line in page:
        if line.heading:
            if last_heading == line.heading:
                # Consecutive lines of one heading level are one heading set over two lines.
                out[-1] += " " + line.text
            else:
                out += ["", f"{'#' * line.heading} {line.text}"]
            last_heading = line.heading
            continue
        if line.gap_before or last_heading:
            out.append("")
        last_heading = 0
        if line.text:
            out.append(line.text)
    return "\n".join(out)
