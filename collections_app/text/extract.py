"""Turning a document's bytes into plain text with its headings kept as Markdown ``#`` lines.

Pure: this module knows a document only by a relative name and its bytes, never by a path, and
imports neither models nor settings. Headings are written as ATX Markdown lines because that is
the one structure the chunker reads, whatever format the text came from.

A document that cannot be read raises `Unreadable` with a category from `REFUSAL_REASONS` (what a
librarian is shown) and a short reason (what the server log gets). Neither carries a filesystem path
(the function is never given one) nor the text of a library's exception, which for some formats quotes
internal file names.
"""

from __future__ import annotations

import codecs
import io
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from . import epub, odf, sheets, slides
from .blocks import Block, PageStart, join_blocks
from .html import read_html
from .ocr import NotInstalled, OcrOptions, ocr_images
from .pdf import PdfProblem, PdfText, read_pdf
from .reading import (
    BAD_NAME,
    CORRUPT,
    EMPTY,
    ENCRYPTED,
    MAX_TEXT_CHARS,
    NEEDS_OCR,
    NO_TEXT_LAYER,
    REFUSAL_REASONS,
    TIMED_OUT,
    TOO_LARGE,
    UNSUPPORTED_TYPE,
    Note,
    Unreadable,
    open_package,
    within_limit,
)
from .tables import markdown_table

__all__ = [
    "BAD_NAME",
    "CORRUPT",
    "EMPTY",
    "ENCRYPTED",
    "IMAGE_SUFFIXES",
    "NEEDS_OCR",
    "NO_TEXT_LAYER",
    "REFUSAL_REASONS",
    "SUPPORTED_SUFFIXES",
    "TIMED_OUT",
    "TOO_LARGE",
    "UNSUPPORTED_TYPE",
    "Extracted",
    "Unreadable",
    "extract",
    "reads_as_text",
    "summarize_opening",
]


@dataclass(frozen=True)
class Extracted:
    """What a readable document gave: its text, what a reviewer should know, and where its pages start.

    ``warnings`` send the document to review (a page with no text layer); ``notes`` only go into the
    build's history (the text was cut at `MAX_TEXT_CHARS`). ``pages`` says where each page (slide,
    sheet) starts in ``text`` (`text.blocks.PageStart`), empty for a format without pages;
    ``ocr_pages`` counts the pages read by OCR."""

    text: str
    warnings: list[str] = field(default_factory=list)
    pages: tuple[PageStart, ...] = ()
    ocr_pages: int = 0
    notes: list[str] = field(default_factory=list)


# Reads a format: ``read(data, warnings)`` returns (or yields) the document's blocks and appends to
# ``warnings`` what should send the document to review.
Reader = Callable[[bytes, list[str]], Iterable[Block]]


def _plain_blocks(data: bytes, _warnings: list[str]) -> list[Block]:
    return [Block(_plain(data))]


def _docx_blocks(data: bytes, _warnings: list[str]) -> list[Block]:
    return [Block(_docx(data))]


# Pictures of text, read by OCR (collections_app.text.ocr) when Tesseract is installed.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff")
# The one vocabulary of suffixes besides PDF and images (read by `pdf` and `ocr`): what is read, and
# by which reader. A name without a
# suffix (README, CHANGELOG) is read as text when it is text (`_untyped`).
READERS: dict[str, Reader] = {
    ".docx": _docx_blocks,
    ".md": _plain_blocks, ".markdown": _plain_blocks, ".txt": _plain_blocks, ".text": _plain_blocks,
    ".html": read_html, ".htm": read_html,
    ".pptx": slides.read_pptx,  # pages: slides
    ".xlsx": sheets.read_xlsx,  # pages: sheets, in workbook order
    ".csv": sheets.read_csv,
    ".epub": epub.read_epub,
    ".odt": odf.read_odt,
    ".odp": odf.read_odp,  # pages: slides
}  # fmt: skip
SUPPORTED_SUFFIXES = (".pdf", *READERS, *IMAGE_SUFFIXES)


def extract(
    name: str, data: bytes, *, ocr: OcrOptions | None = None, on_ocr_page: Callable[[int], None] | None = None
) -> Extracted:
    """Extract the text of the document called ``name`` (relative; only its suffix is used) from ``data``.

    The format is chosen by the suffix alone, compared case-insensitively; a name without one is read
    as text when its bytes are text. Raises `Unreadable` for an unsupported suffix, a damaged or
    encrypted file, text that is not UTF-8 where UTF-8 is required, a package that would unpack past
    its limits, and a document with no text at all. Text past `MAX_TEXT_CHARS` is left out, with a note.
    ``ocr`` None: pages without a text layer and images are not read by OCR (a scan is then refused as
    `NEEDS_OCR`). ``on_ocr_page(n)`` is told before the n-th page is OCR'd (the bounded extractor
    extends its deadline by the page's own limit).
    """
    suffix = _suffix(name)
    warnings: list[str] = []
    ocr_pages = 0
    if suffix == ".pdf" or suffix in IMAGE_SUFFIXES:
        read = _pdf(data, ocr, on_ocr_page) if suffix == ".pdf" else _image(data, ocr, on_ocr_page)
        blocks, warnings, ocr_pages = read.blocks, list(read.warnings), read.ocr_pages
    elif suffix in READERS or not suffix:
        blocks = (READERS[suffix] if suffix else _untyped)(data, warnings)
    else:
        raise Unreadable(f"unsupported type {suffix}", category=UNSUPPORTED_TYPE)
    kept = within_limit(blocks, MAX_TEXT_CHARS)
    text, pages = join_blocks(kept)
    if not text:
        raise Unreadable("no text", category=EMPTY)
    notes = [str(w) for w in warnings if isinstance(w, Note)]
    warnings = [w for w in warnings if not isinstance(w, Note)]
    notes += [f"only its first {MAX_TEXT_CHARS:,} characters were read"] if kept.cut else []
    return Extracted(text=text, warnings=warnings, pages=pages, ocr_pages=ocr_pages, notes=notes)


def summarize_opening(text: str, limit: int = 300) -> str:
    """The first ``limit`` characters or so of the document's prose, for a person skimming a list.

    Heading lines are left out (a title repeats the document's name); whitespace is collapsed; a longer
    opening is cut at the last word boundary inside the limit and marked with "…". A document made only
    of headings is summarised from the heading text, without the ``#`` markers.
    """
    lines = text.splitlines()
    prose = [line for line in lines if not _HEADING_LINE.match(line)]
    source = " ".join(prose)
    if not source.strip():
        source = " ".join(_HEADING_LINE.sub(r"\2", line) for line in lines)
    flat = " ".join(source.split())
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit + 1)
    # One enormous word: cutting it is the only way to stay inside the limit.
    head = flat[:cut] if cut > 0 else flat[:limit]
    return head.rstrip(" ,;:") + "…"


_HEADING_LINE = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")


def _suffix(name: str) -> str:
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    dot = base.rfind(".")
    # ".profile" style names have no suffix; "a." has an empty one.
    return base[dot:].lower() if dot > 0 else ""


# --- PDF -----------------------------------------------------------------------------------------


_PDF_PROBLEMS = {
    "encrypted": ENCRYPTED,
    "corrupt": CORRUPT,
    "empty": EMPTY,
    "no_text": NO_TEXT_LAYER,
    "needs_ocr": NEEDS_OCR,
}


def _pdf(data: bytes, ocr: OcrOptions | None, on_ocr_page) -> PdfText:
    try:
        read = read_pdf(data, ocr=ocr, on_ocr_page=on_ocr_page)
    except PdfProblem as exc:
        raise Unreadable(exc.reason, category=_PDF_PROBLEMS[exc.kind]) from exc
    return read


def _image(data: bytes, ocr: OcrOptions | None, on_ocr_page) -> PdfText:
    """An image file: its frames as pages, read by OCR."""
    if ocr is None:
        raise Unreadable("an image is read only by OCR", category=NEEDS_OCR)
    try:
        pages = ocr_images(data, ocr, on_page=on_ocr_page)
    except NotInstalled as exc:
        raise Unreadable(str(exc), category=NEEDS_OCR) from exc
    except ValueError as exc:
        if "pixel limit" in str(exc):
            raise Unreadable(str(exc), category=TOO_LARGE) from exc
        raise Unreadable("not a readable image", category=CORRUPT) from exc
    except MemoryError:
        raise
    except Exception as exc:  # Pillow reports damaged images as many exception types
        raise Unreadable("not a readable image", category=CORRUPT) from exc
    read = PdfText(blocks=[Block(page.text, number) for number, page in enumerate(pages, start=1)])
    for number, page in enumerate(pages, start=1):
        if page.text.strip():
            read.ocr_pages += 1
        elif page.problem:
            read.warnings.append(f"page {number} was not read by OCR: {page.problem}")
    if not read.ocr_pages:
        raise Unreadable("OCR found no text", category=NO_TEXT_LAYER)
    return read


# --- DOCX ----------------------------------------------------------------------------------------

_HEADING_STYLE = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


def _docx(data: bytes) -> str:
    import docx
    from docx.table import Table

    open_package(data, "Word document").close()  # refuses a package that would unpack past its limits
    try:
        document = docx.Document(io.BytesIO(data))
        blocks = document.iter_inner_content()
        parts: list[str] = []
        size = 0
        for block in blocks:
            if size > MAX_TEXT_CHARS:  # assemble cuts the text there; the rest is never read
                break
            if isinstance(block, Table):
                text = _docx_table(block)
            else:
                line = " ".join(block.text.split())
                level = _docx_heading_level(block) if line else 0
                text = f"{'#' * level} {line}" if level else line
            if text:
                parts.append(text)
                size += len(text) + 2
    except Exception as exc:  # a damaged package surfaces as zip, XML, key or value errors alike
        raise Unreadable("not a readable Word document", category=CORRUPT) from exc
    return "\n\n".join(parts)


def _docx_heading_level(paragraph) -> int:
    try:
        style_name = (paragraph.style.name or "") if paragraph.style is not None else ""
    except Exception:  # a style reference the document does not define
        return 0
    if style_name.lower() == "title":
        return 1
    match = _HEADING_STYLE.match(style_name.strip())
    # Markdown has six heading levels; Word has nine.
    return min(int(match.group(1)), 6) if match else 0


def _docx_table(table) -> str:
    """The table as Markdown rows (`tables`). A cell merged across columns is repeated in each, so
    every value still stands under its header."""
    return markdown_table([cell.text for cell in row.cells] for row in table.rows)


# --- Markdown and plain text ---------------------------------------------------------------------


def _plain(data: bytes) -> str:
    """UTF-8 text, decoded only as far as `MAX_TEXT_CHARS` can reach (four bytes a character at most)."""
    head = data[: MAX_TEXT_CHARS * 4 + 4]
    try:
        # utf-8-sig drops a byte-order mark; anything else that is not UTF-8 is refused, not guessed.
        return codecs.getincrementaldecoder("utf-8-sig")().decode(head, final=len(head) == len(data))
    except UnicodeDecodeError as exc:
        # Text in another encoding is not damaged, but it is not a kind of file this reads.
        raise Unreadable("not UTF-8 text", category=UNSUPPORTED_TYPE) from exc


def reads_as_text(data: bytes) -> bool:
    """Whether a file without a suffix is text: its opening is UTF-8 without control characters other
    than tab, line ends and form feed (a binary file that happens to decode has them)."""
    opening = data[:65536]
    try:
        sample = codecs.getincrementaldecoder("utf-8-sig")().decode(opening, final=len(opening) == len(data))
    except UnicodeDecodeError:
        return False
    return not any(ord(ch) < 32 and ch not in "\t\n\r\f" for ch in sample)


def _untyped(data: bytes, _warnings: list[str]) -> list[Block]:
    """A file without a suffix (README, CHANGELOG, LICENSE): read as text when it is text."""
    if not reads_as_text(data):
        raise Unreadable("unsupported type (no suffix, not text)", category=UNSUPPORTED_TYPE)
    return [Block(_plain(data))]
