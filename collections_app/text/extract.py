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
from .reading import (
    BAD_NAME,
    CORRUPT,
    EMPTY,
    ENCRYPTED,
    MAX_TEXT_CHARS,
    NO_TEXT_LAYER,
    REFUSAL_REASONS,
    TIMED_OUT,
    TOO_LARGE,
    UNSUPPORTED_TYPE,
    Unreadable,
    open_package,
    within_limit,
)
from .tables import markdown_table

__all__ = [
    "BAD_NAME", "CORRUPT", "EMPTY", "ENCRYPTED", "NO_TEXT_LAYER", "REFUSAL_REASONS", "SUPPORTED_SUFFIXES",
    "TIMED_OUT", "TOO_LARGE", "UNSUPPORTED_TYPE", "Extracted", "Unreadable", "extract", "reads_as_text", "summarize_opening",
]


@dataclass(frozen=True)
class Extracted:
    """What a readable document gave: its text, what a reviewer should know, and where its pages start.

    ``warnings`` send the document to review (a page with no text layer); ``notes`` only go into the
    build's history (the text was cut at `MAX_TEXT_CHARS`). ``pages`` says where each page (slide,
    sheet) starts in ``text`` (`text.blocks.PageStart`), empty for a format without pages."""

    text: str
    warnings: list[str] = field(default_factory=list)
    pages: tuple[PageStart, ...] = ()
    notes: list[str] = field(default_factory=list)


# Reads a format: ``read(data, warnings)`` returns (or yields) the document's blocks and appends to
# ``warnings`` what should send the document to review.
Reader = Callable[[bytes, list[str]], Iterable[Block]]


def _plain_blocks(data: bytes, _warnings: list[str]) -> list[Block]:
    return [Block(_plain(data))]


def _docx_blocks(data: bytes, _warnings: list[str]) -> list[Block]:
    return [Block(_docx(data))]


# The one vocabulary of suffixes besides PDF: what is read, and by which reader. A name without a
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
SUPPORTED_SUFFIXES = (".pdf", *READERS)


def extract(name: str, data: bytes) -> Extracted:
    """Extract the text of the document called ``name`` (relative; only its suffix is used) from ``data``.

    The format is chosen by the suffix alone, compared case-insensitively; a name without one is read
    as text when its bytes are text. Raises `Unreadable` for an unsupported suffix, a damaged or
    encrypted file, text that is not UTF-8 where UTF-8 is required, a package that would unpack past
    its limits, and a document with no text at all. Text past `MAX_TEXT_CHARS` is left out, with a note.
    """
    suffix = _suffix(name)
    warnings: list[str] = []
    if suffix == ".pdf":
        text, warnings = _pdf(data)
        blocks = [Block(text)]
    elif suffix in READERS or not suffix:
        blocks = (READERS[suffix] if suffix else _untyped)(data, warnings)
    else:
        raise Unreadable(f"unsupported type {suffix}", category=UNSUPPORTED_TYPE)
    kept = within_limit(blocks, MAX_TEXT_CHARS)
    text, pages = join_blocks(kept)
    if not text:
        raise Unreadable("no text", category=EMPTY)
    notes = [f"only its first {MAX_TEXT_CHARS:,} characters were read"] if kept.cut else []
    return Extracted(text=text, warnings=warnings, pages=pages, notes=notes)


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


def _pdf(data: bytes) -> tuple[str, list[str]]:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")
            except Exception as exc:  # an unsupported algorithm is as closed to us as a password
                raise Unreadable("encrypted", category=ENCRYPTED) from exc
            if not opened:
                raise Unreadable("encrypted", category=ENCRYPTED)
        pages = list(reader.pages)
    except Unreadable:
        raise
    except (PdfReadError, Exception) as exc:
        # Damaged input surfaces from deep inside pypdf as almost any exception type, not only
        # PdfReadError; whatever it is, the document is not readable and the build goes on.
        raise Unreadable("not a readable PDF", category=CORRUPT) from exc

    texts: list[str] = []
    warnings: list[str] = []
    for number, page in enumerate(pages, start=1):
        try:
            page_text = page.extract_text() or ""
        except Exception:
            # One broken page should not cost the rest of the document.
            warnings.append(f"page {number} could not be read")
            continue
        if page_text.strip():
            texts.append(page_text.strip())
        else:
            warnings.append(f"page {number} has no text layer")
    if not texts:
        # Pages but no text on any of them: a scan, most likely, which OCR would read.
        raise Unreadable("no text", category=NO_TEXT_LAYER if pages else EMPTY)
    return "\n\n".join(texts), warnings


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
