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
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser

from .blocks import Block, PageStart, join_blocks
from .blocks import tidy as _tidy
from .ocr import NotInstalled, OcrOptions, ocr_images
from .pdf import PdfProblem, PdfText, read_pdf

__all__ = [
    "BAD_NAME", "CORRUPT", "EMPTY", "ENCRYPTED", "IMAGE_SUFFIXES", "NEEDS_OCR", "NO_TEXT_LAYER", "REFUSAL_REASONS",
    "SUPPORTED_SUFFIXES", "TIMED_OUT", "TOO_LARGE", "UNSUPPORTED_TYPE", "Extracted", "Unreadable", "extract",
    "summarize_opening",
]

# Pictures of text, read by OCR (collections_app.text.ocr) when Tesseract is installed.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".tif", ".tiff")
SUPPORTED_SUFFIXES = (".pdf", ".docx", ".md", ".markdown", ".txt", ".text", ".html", ".htm", *IMAGE_SUFFIXES)

# Why a document was refused, in words a librarian acts on: the one vocabulary every refusal
# (extraction, the build's size and time limits, uploads) is recorded in. A category names a kind
# of trouble, never a file or a path, so it may be stored and shown; the detailed reason is only logged.
CORRUPT = "corrupt"
ENCRYPTED = "encrypted"
NO_TEXT_LAYER = "no text layer — scanned?"
UNSUPPORTED_TYPE = "unsupported type"
TOO_LARGE = "too large"  # over the size limit on disk, or over the memory cap while extracting
EMPTY = "empty"
TIMED_OUT = "timed out"  # over the wall-clock limit per document (collections_app.text.bounded)
BAD_NAME = "bad name"  # a file name the store cannot hold (not UTF-8, or too long)
NEEDS_OCR = "needs OCR (not installed)"  # a scan or an image, on a machine without Tesseract (or its language)
REFUSAL_REASONS = (CORRUPT, ENCRYPTED, NO_TEXT_LAYER, UNSUPPORTED_TYPE, TOO_LARGE, EMPTY, TIMED_OUT, BAD_NAME,
                   NEEDS_OCR)


class Unreadable(Exception):
    """A document that yields no usable text.

    ``category`` is one of `REFUSAL_REASONS` and is what people are shown; ``reason`` is a short
    detail for the server log ("not UTF-8 text", "unsupported type .xyz").
    """

    def __init__(self, reason: str, *, category: str) -> None:
        if category not in REFUSAL_REASONS:
            raise ValueError(f"unknown refusal category {category!r}")
        super().__init__(reason)
        self.reason, self.category = reason, category


@dataclass(frozen=True)
class Extracted:
    """What a readable document gave: its text, and anything a reviewer should know about the scan.

    ``pages`` says where each page (slide, sheet) starts in ``text`` (`text.blocks.PageStart`), empty for
    a format without pages; ``ocr_pages`` counts the pages read by OCR."""

    text: str
    warnings: list[str] = field(default_factory=list)
    pages: tuple[PageStart, ...] = ()
    ocr_pages: int = 0


def extract(name: str, data: bytes, *, ocr: OcrOptions | None = None,
            on_ocr_page: Callable[[int], None] | None = None) -> Extracted:
    """Extract the text of the document called ``name`` (relative; only its suffix is used) from ``data``.

    The format is chosen by the suffix alone, compared case-insensitively. Raises `Unreadable` for an
    unsupported suffix, a damaged or encrypted file, text that is not UTF-8 where UTF-8 is required,
    and a document with no text at all. ``ocr`` None: pages without a text layer and images are not
    read by OCR (a scan is then refused as `NEEDS_OCR`). ``on_ocr_page(n)`` is told before the n-th page
    is OCR'd (the bounded extractor extends its deadline by the page's own limit).
    """
    suffix = _suffix(name)
    if suffix == ".pdf" or suffix in IMAGE_SUFFIXES:
        read = _pdf(data, ocr, on_ocr_page) if suffix == ".pdf" else _image(data, ocr, on_ocr_page)
        text, pages = join_blocks(read.blocks)
        if not text:
            raise Unreadable("no text", category=EMPTY)
        return Extracted(text=text, warnings=read.warnings, pages=pages, ocr_pages=read.ocr_pages)
    if suffix == ".docx":
        text, warnings = _docx(data), []
    elif suffix in (".md", ".markdown", ".txt", ".text"):
        text, warnings = _plain(data), []
    elif suffix in (".html", ".htm"):
        text, warnings = _html(data), []
    else:
        raise Unreadable(
            f"unsupported type {suffix}" if suffix else "unsupported type (no suffix)", category=UNSUPPORTED_TYPE
        )
    text = _tidy(text)
    if not text:
        raise Unreadable("no text", category=EMPTY)
    return Extracted(text=text, warnings=warnings)


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


_PDF_PROBLEMS = {"encrypted": ENCRYPTED, "corrupt": CORRUPT, "empty": EMPTY, "no_text": NO_TEXT_LAYER,
                 "needs_ocr": NEEDS_OCR}


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

    try:
        document = docx.Document(io.BytesIO(data))
        blocks = list(document.iter_inner_content())
    except Exception as exc:  # a damaged package surfaces as zip, XML, key or value errors alike
        raise Unreadable("not a readable Word document", category=CORRUPT) from exc

    parts: list[str] = []
    for block in blocks:
        if isinstance(block, Table):
            table_text = _docx_table(block)
            if table_text:
                parts.append(table_text)
            continue
        line = " ".join(block.text.split())
        if not line:
            continue
        level = _docx_heading_level(block)
        parts.append(f"{'#' * level} {line}" if level else line)
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
    rows: list[str] = []
    for row in table.rows:
        cells: list[str] = []
        seen: set[int] = set()
        for cell in row.cells:
            # A merged cell is returned once per grid column it spans; keep it once.
            if id(cell._tc) in seen:
                continue
            seen.add(id(cell._tc))
            cells.append(" ".join(cell.text.split()))
        if any(cells):
            rows.append(" | ".join(cells))
    return "\n".join(rows)


# --- Markdown and plain text ---------------------------------------------------------------------


def _plain(data: bytes) -> str:
    try:
        # utf-8-sig drops a byte-order mark; anything else that is not UTF-8 is refused, not guessed.
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # Text in another encoding is not damaged, but it is not a kind of file this reads.
        raise Unreadable("not UTF-8 text", category=UNSUPPORTED_TYPE) from exc


# --- HTML ----------------------------------------------------------------------------------------

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
# What browsers do (WHATWG Encoding): these labels mean windows-1252, which differs from Latin-1
# only in 0x80-0x9F, where real pages put curly quotes and dashes.
_WINDOWS_1252_LABELS = {
    "iso-8859-1",
    "iso8859-1",
    "latin1",
    "latin-1",
    "l1",
    "ascii",
    "us-ascii",
    "iso_8859-1",
}


def _html_codec(data: bytes) -> tuple[str, bytes]:
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8", data[len(codecs.BOM_UTF8) :]
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16", data
    match = _META_CHARSET.search(data[:4096])
    if match:
        label = match.group(1).decode("ascii").lower()
        if label in _WINDOWS_1252_LABELS:
            return "cp1252", data
        try:
            name = codecs.lookup(label).name
        except LookupError:
            return "utf-8", data
        # A page whose bytes we are reading as ASCII cannot really be UTF-16; the declaration is wrong.
        if not name.startswith(("utf-16", "utf-32")):
            return name, data
    return "utf-8", data


def _html(data: bytes) -> str:
    codec, body = _html_codec(data)
    try:
        markup = body.decode(codec)
    except UnicodeDecodeError as exc:
        raise Unreadable(
            "not UTF-8 text" if codec == "utf-8" else f"not valid {codec} text",
            category=UNSUPPORTED_TYPE if codec == "utf-8" else CORRUPT,
        ) from exc
    parser = _HtmlText()
    try:
        parser.feed(markup)
        parser.close()
    except Exception as exc:
        raise Unreadable("not readable HTML", category=CORRUPT) from exc
    return parser.result()


# Elements whose text is never part of what a reader sees. <head> itself is not listed: its only
# text-bearing children are these, and an unclosed <head> (legal HTML) must not swallow the body.
_SKIPPED = {"script", "style", "template", "title", "noscript", "svg", "math", "iframe"}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_LINE_BLOCKS = {"br", "li", "tr", "dt", "dd", "option", "caption", "figcaption", "summary"}
_PARAGRAPH_BLOCKS = {
    "p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "blockquote",
    "pre", "ul", "ol", "dl", "table", "thead", "tbody", "tfoot", "form", "fieldset", "figure",
    "address", "details", "hr", "body", "html", "legend",
}  # fmt: skip
_VOID = {"br", "hr", "img", "meta", "link", "input", "area", "base", "col", "embed", "source", "track", "wbr"}


class _HtmlText(HTMLParser):
    """Collects visible text, turning block structure into line and paragraph breaks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._parts: list[str] = []
        self._pending = 0  # 0 none, 1 line break, 2 blank line; emitted before the next text
        self._line_start = True
        self._skip = 0
        self._pre = 0
        self._heading: tuple[int, list[str]] | None = None
        self._first_cell = True

    # The parser's callbacks.
    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in _SKIPPED:
            self._skip += 1
            return
        if self._skip:
            return
        if tag in _HEADINGS:
            self._break(2)
            self._heading = (_HEADINGS[tag], [])
            return
        if self._heading is not None:
            if tag in _LINE_BLOCKS or tag in _PARAGRAPH_BLOCKS:
                self._heading[1].append(" ")  # a heading stays on one line
            return
        if tag == "pre":
            self._pre += 1
        if tag == "tr":
            self._first_cell = True
        if tag in ("td", "th"):
            if not self._first_cell:
                self._put(" | ")
            self._first_cell = False
            return
        if tag in _LINE_BLOCKS:
            self._break(1)
        elif tag in _PARAGRAPH_BLOCKS:
            self._break(2)

    def handle_startendtag(self, tag: str, attrs) -> None:
        # <br/>: a self-closed element opens and closes at once; never count it as skipped content.
        if tag in _SKIPPED:
            return
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIPPED:
            self._skip = max(0, self._skip - 1)
            return
        if self._skip:
            return
        if tag in _HEADINGS and self._heading is not None:
            level, words = self._heading
            self._heading = None
            title = " ".join("".join(words).split())
            if title:
                self._break(2)
                self._put(f"{'#' * level} {title}")
            self._break(2)
            return
        if self._heading is not None:
            return
        if tag == "pre" and self._pre:
            self._pre -= 1
        if tag in _LINE_BLOCKS:
            self._break(1)
        elif tag in _PARAGRAPH_BLOCKS:
            self._break(2)

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._heading is not None:
            self._heading[1].append(data)
            return
        if self._pre:
            for index, line in enumerate(data.split("\n")):
                if index:
                    self._break(1)
                self._put(line, keep_leading=True)
            return
        self._put(re.sub(r"\s+", " ", data))

    # Assembling the output.
    def _put(self, text: str, *, keep_leading: bool = False) -> None:
        if self._line_start and not keep_leading:
            text = text.lstrip(" ")
        if not text:
            return
        if self._pending and self._parts:
            self._parts[-1] = self._parts[-1].rstrip(" ")
            self._parts.append("\n" * self._pending)
        self._pending = 0
        self._parts.append(text)
        self._line_start = False

    def _break(self, kind: int) -> None:
        self._pending = max(self._pending, kind)
        self._line_start = True

    def result(self) -> str:
        if self._heading is not None:  # an unclosed heading at the end of the page
            level, words = self._heading
            self._heading = None
            title = " ".join("".join(words).split())
            if title:
                self._break(2)
                self._put(f"{'#' * level} {title}")
        return "".join(self._parts)
