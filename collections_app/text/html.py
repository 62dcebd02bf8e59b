"""Reading HTML (and the XHTML of an EPUB): visible text with headings as Markdown, tables as tables.

Pure. What is dropped: scripts, styles and other invisible elements; navigation (``<nav>``) and the
page's own banner and footer (a ``<header>`` or ``<footer>`` that is not inside an ``<article>``,
``<aside>``, ``<main>``, ``<nav>`` or ``<section>`` — ARIA's banner and contentinfo landmarks — and
any element whose role says it is one of those), because the same menu on every page of a site is
page furniture, not knowledge, and would match every question about the site's words. Headings in
the banner are kept (a page often puts its title there), and a header inside an article (its title,
its byline) is kept whole. Tables are written by `tables.table_blocks`.

The markup is fed to the parser a slice at a time and reading stops once `MAX_TEXT_CHARS` of text
are held, so a 50 MB page costs its bytes, not a parse tree or a list of every word.
"""

from __future__ import annotations

import codecs
import re
from html.parser import HTMLParser

from .blocks import Block
from .reading import CORRUPT, MAX_TEXT_CHARS, UNSUPPORTED_TYPE, Note, Unreadable
from .tables import markdown_table

FEED_CHARS = 1 << 20

_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.IGNORECASE)
# What browsers do (WHATWG Encoding): these labels mean windows-1252, which differs from Latin-1
# only in 0x80-0x9F, where real pages put curly quotes and dashes.
_WINDOWS_1252_LABELS = {
    "iso-8859-1", "iso8859-1", "latin1", "latin-1", "l1", "ascii", "us-ascii", "iso_8859-1",
}  # fmt: skip


def html_codec(data: bytes) -> tuple[str, bytes, str]:
    """(the codec to decode with, the bytes to decode, a note when the page's declaration was set aside)."""
    if data.startswith(codecs.BOM_UTF8):
        return "utf-8", data[len(codecs.BOM_UTF8) :], ""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "utf-16", data, ""
    match = _META_CHARSET.search(data[:4096])
    if match:
        label = match.group(1).decode("ascii", "replace").lower()
        if label in _WINDOWS_1252_LABELS:
            return "cp1252", data, ""
        try:
            info = codecs.lookup(label)
            if not getattr(info, "_is_text_encoding", True):  # rot13, zlib_codec, base64: not of text
                raise LookupError(label)
            name = info.name
        except LookupError:
            return "utf-8", data, f"its <meta charset> {label[:40]!r} is not a text encoding; read as UTF-8"
        # A page whose bytes we are reading as ASCII cannot really be UTF-16; the declaration is wrong.
        if not name.startswith(("utf-16", "utf-32")):
            return name, data, ""
    return "utf-8", data, ""


def read_html(data: bytes, warnings: list[str] | None = None, *, limit: int = MAX_TEXT_CHARS) -> list[Block]:
    """The page's text as one part (HTML has no pages)."""
    codec, body, note = html_codec(data)
    if note and warnings is not None:
        warnings.append(Note(note))
    try:
        markup = body.decode(codec)
    except UnicodeDecodeError as exc:
        raise Unreadable(
            "not UTF-8 text" if codec == "utf-8" else f"not valid {codec} text",
            category=UNSUPPORTED_TYPE if codec == "utf-8" else CORRUPT,
        ) from exc
    del body
    return [Block(html_text(markup, limit=limit))]


def html_text(markup: str, *, limit: int = MAX_TEXT_CHARS) -> str:
    """Visible text of ``markup``, read until about ``limit`` characters are held."""
    parser = _HtmlText()
    try:
        for start in range(0, len(markup), FEED_CHARS):
            parser.feed(markup[start : start + FEED_CHARS])
            if parser.size > limit:
                break
        parser.close()
    except Exception as exc:
        raise Unreadable("not readable HTML", category=CORRUPT) from exc
    return parser.result()


# Elements whose text is never part of what a reader sees. <head> itself is not listed: its only
# text-bearing children are these, and an unclosed <head> (legal HTML) must not swallow the body.
_SKIPPED = {"script", "style", "template", "title", "noscript", "svg", "math", "iframe"}
_FURNITURE_ROLES = {"navigation", "banner", "contentinfo"}
_SECTIONING = {"article", "aside", "main", "nav", "section"}
_HEADINGS = {"h1": 1, "h2": 2, "h3": 3, "h4": 4, "h5": 5, "h6": 6}
_LINE_BLOCKS = {"br", "li", "tr", "dt", "dd", "option", "caption", "figcaption", "summary"}
_PARAGRAPH_BLOCKS = {
    "p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "blockquote",
    "pre", "ul", "ol", "dl", "table", "thead", "tbody", "tfoot", "form", "fieldset", "figure",
    "address", "details", "hr", "body", "html", "legend",
}  # fmt: skip
_VOID = {"br", "hr", "img", "meta", "link", "input", "area", "base", "col", "embed", "source", "track", "wbr"}
MAX_TABLE_DEPTH = 8  # a table nested deeper is read as its outer cell's text


class _Table:
    def __init__(self) -> None:
        self.rows: list[list[str]] = []
        self.cell: list[str] | None = None

    def start_row(self) -> None:
        self.end_cell()
        self.rows.append([])

    def start_cell(self) -> None:
        self.end_cell()
        if not self.rows:
            self.rows.append([])
        self.cell = []

    def end_cell(self) -> None:
        if self.cell is not None:
            self.rows[-1].append(" ".join("".join(self.cell).split()))
            self.cell = None


class _HtmlText(HTMLParser):
    """Collects visible text, turning block structure into line and paragraph breaks."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._parts: list[str] = []
        self.size = 0
        self._pending = 0  # 0 none, 1 line break, 2 blank line; emitted before the next text
        self._line_start = True
        self._skip = 0
        self._dropped: list[str] = []  # the tags that opened a dropped stretch (furniture), innermost last
        self._banner: list[str] = []  # the same for the page's banner, of which only headings are kept
        self._sectioning = 0
        self._pre = 0
        self._heading: tuple[int, list[str]] | None = None
        self._tables: list[_Table] = []

    # The parser's callbacks.
    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in _SKIPPED:
            self._skip += 1
            return
        furniture = self._furniture(tag, attrs)
        if furniture == "banner":
            self._banner.append(tag)
        elif furniture:
            self._dropped.append(tag)
            self._skip += 1
            return
        if tag in _SECTIONING:
            self._sectioning += 1
        if self._skip:
            return
        if self._tables and self._table_tag(tag):
            return
        if tag == "table" and len(self._tables) < MAX_TABLE_DEPTH:
            if not self._tables:
                self._break(2)
            self._tables.append(_Table())
            return
        if self._tables:
            if self._tables[-1].cell is not None and (tag in _LINE_BLOCKS or tag in _PARAGRAPH_BLOCKS):
                self._tables[-1].cell.append(" ")
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
        if tag in _LINE_BLOCKS:
            self._break(1)
        elif tag in _PARAGRAPH_BLOCKS:
            self._break(2)

    def _furniture(self, tag: str, attrs) -> str:
        """ "drop" for navigation and the page's footer, "banner" for the page's header (whose headings
        are kept: a page often puts its title there), "" for content."""
        role = (next((value for name, value in attrs if name == "role"), None) or "").strip().lower()
        if role == "banner" or (tag == "header" and not role and not self._sectioning):
            return "banner"
        if role in _FURNITURE_ROLES or tag == "nav" or (tag == "footer" and not self._sectioning):
            return "drop"
        return ""

    def _table_tag(self, tag: str) -> bool:
        """Row and cell tags of the table being read; True when the tag was taken care of."""
        table = self._tables[-1]
        if tag == "tr":
            table.start_row()
            return True
        if tag in ("td", "th"):
            table.start_cell()
            return True
        return False

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
        if self._dropped and self._dropped[-1] == tag:
            self._dropped.pop()
            self._skip = max(0, self._skip - 1)
            return
        if self._banner and self._banner[-1] == tag:
            self._banner.pop()
        if tag in _SECTIONING:
            self._sectioning = max(0, self._sectioning - 1)
        if self._skip:
            return
        if self._tables:
            if tag in ("td", "th"):
                self._tables[-1].end_cell()
            elif tag == "table":
                self._end_table()
            return
        if tag in _HEADINGS and self._heading is not None:
            self._end_heading()
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
        if self._skip or (self._banner and self._heading is None):
            return
        if self._tables:
            table = self._tables[-1]
            if table.cell is None:  # text between cells (a caption, stray text): a cell of its own
                if not data.strip():
                    return
                table.start_cell()
            table.cell.append(data)
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

    def _end_table(self) -> None:
        table = self._tables.pop()
        table.end_cell()
        if self._tables:  # a nested table: its text is the outer cell's
            outer = self._tables[-1]
            if outer.cell is None:
                outer.start_cell()
            outer.cell.append(" " + " ".join(cell for row in table.rows for cell in row) + " ")
            return
        text = markdown_table(table.rows)
        if text:
            self._break(2)
            for index, line in enumerate(text.split("\n")):
                if index:
                    self._break(1)
                self._put(line, keep_leading=True)
        self._break(2)

    def _end_heading(self) -> None:
        level, words = self._heading
        self._heading = None
        title = " ".join("".join(words).split())
        if title:
            self._break(2)
            self._put(f"{'#' * level} {title}")
        self._break(2)

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
        self.size += len(text)
        self._line_start = False

    def _break(self, kind: int) -> None:
        self._pending = max(self._pending, kind)
        self._line_start = True

    def result(self) -> str:
        while self._tables:  # tables never closed at the end of the page
            self._end_table()
        if self._heading is not None:  # an unclosed heading at the end of the page
            self._end_heading()
        return "".join(self._parts)
