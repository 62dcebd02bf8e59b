"""What every format's reader shares: the refusal vocabulary, the limits, and the parts a reader returns.

Pure: no models, no settings. A reader turns a document's bytes into `Part`s (a stretch of text and
the page, slide or row it starts on); `assemble` joins them into one text with Markdown headings and
records where each page starts, so the chunker and the page carrier see the same offsets. The
readers for the older formats (PDF, DOCX, text) live in `extract`; each newer one has its own
module (`html`, `slides`, `sheets`, `epub`, `odf`), and `extract` holds the one table of suffixes.
"""

from __future__ import annotations

import bisect
import re
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass

# Why a document was refused, in words a librarian acts on: the one vocabulary every refusal
# (extraction, the build's size and time limits, uploads) is recorded in. A category names a kind
# of trouble, never a file or a path, so it may be stored and shown; the detailed reason is only logged.
CORRUPT = "corrupt"
ENCRYPTED = "encrypted"
NO_TEXT_LAYER = "no text layer — scanned?"
UNSUPPORTED_TYPE = "unsupported type"
TOO_LARGE = "too large"  # over a size limit on disk or unpacked, or over the memory cap while extracting
EMPTY = "empty"
TIMED_OUT = "timed out"  # over the wall-clock limit per document (collections_app.text.bounded)
BAD_NAME = "bad name"  # a file name the store cannot hold (not UTF-8, or too long)
REFUSAL_REASONS = (CORRUPT, ENCRYPTED, NO_TEXT_LAYER, UNSUPPORTED_TYPE, TOO_LARGE, EMPTY, TIMED_OUT, BAD_NAME)

# The stated bounds of reading one document (docs/collections.md, "Limits of each format").
# Text kept per document: about a 1,500-page book. Far more than the 240 paragraphs the structure
# strategy keeps, so it cuts only what no strategy would index well, and it bounds what the build
# worker holds and chunks for any single file (issue 24, item 8).
MAX_TEXT_CHARS = 4_000_000
# A zip package (DOCX, PPTX, XLSX, EPUB, OpenDocument): what its directory declares, checked before
# any member is inflated. zipfile stops a member at its declared size (and fails its CRC if the
# member lied), so the declared sizes bound what a reader can be made to unpack.
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_MEMBERS = 10_000


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
class Part:
    """A stretch of a document's text, and the page (slide, row) it starts on when the format has one.

    ``heading`` (optional) is written above the text as a Markdown heading of ``level``: a slide's
    title, a sheet's name, a chapter's title."""

    text: str
    page: int | None = None
    heading: str = ""
    level: int = 1
    # Later pages starting inside ``text``: (offset in text, page), ascending (a table's rows).
    pages_within: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class PageMark:
    """Where a page (slide, sheet row) begins in the extracted text: the page carrier."""

    start: int
    page: int


@dataclass(frozen=True)
class Assembled:
    text: str
    pages: tuple[PageMark, ...]
    cut: bool  # text past MAX_TEXT_CHARS was left out


def assemble(parts: Iterable[Part], *, limit: int = MAX_TEXT_CHARS) -> Assembled:
    """Join parts with blank lines, each under its heading, noting the offset where each page starts.

    Parts are tidied one by one, so the offsets recorded are offsets in the returned text. Reading
    stops once ``limit`` characters are held (``cut``): a reader that yields parts lazily is never
    asked for more."""
    pieces: list[str] = []
    marks: list[PageMark] = []
    length, cut = 0, False
    for part in parts:
        body = tidy(part.text)
        title = " ".join(part.heading.split())
        block = "\n\n".join(x for x in (f"{'#' * min(max(part.level, 1), 6)} {title}" if title else "", body) if x)
        if not block:
            continue
        start = length + (2 if pieces else 0)
        if start + len(block) > limit:
            room = limit - start
            block = _cut_at_line(block, room) if room > 0 else ""
            cut = True
        if block:
            within = [(0, part.page)] if part.page is not None else []
            if part.pages_within and body == part.text:  # offsets hold only in text tidying left alone
                skip = len(block) - len(body)
                within += [(skip + offset, page) for offset, page in part.pages_within if skip + offset < len(block)]
            for offset, page in within:
                if not marks or marks[-1].page != page:
                    marks.append(PageMark(start=start + offset, page=page))
            pieces.append(block)
            length = start + len(block)
        if cut:
            break
    return Assembled(text="\n\n".join(pieces), pages=tuple(marks), cut=cut)


def page_span(pages: tuple[PageMark, ...] | list[PageMark], start: int, end: int) -> tuple[int, int] | None:
    """(first, last) page of the text between offsets ``start`` and ``end``; None without pages."""
    if not pages:
        return None
    starts = [mark.start for mark in pages]
    first = bisect.bisect_right(starts, start) - 1
    last = bisect.bisect_right(starts, max(start, end - 1)) - 1
    if last < 0:
        return None
    return pages[max(first, 0)].page, pages[last].page


def tidy(text: str) -> str:
    """Normalise line ends, drop trailing spaces on lines and collapse runs of blank lines."""
    # NUL is dropped because PostgreSQL text columns cannot hold it.
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "")
    text = re.sub(r"[ \t]+\n", "\n", text)
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip()


def _cut_at_line(text: str, room: int) -> str:
    line_end = text.rfind("\n", 0, room + 1)
    return text[: line_end if line_end > 0 else room].rstrip()


def open_package(data: bytes, kind: str) -> zipfile.ZipFile:
    """A zip package whose directory promises bounded work; `Unreadable` otherwise.

    ``kind`` names the format for the log ("Word document"). A package declaring more than
    `MAX_MEMBERS` members, a member over `MAX_MEMBER_BYTES` or a total over `MAX_UNPACKED_BYTES`
    is refused as too large before anything is inflated."""
    import io

    try:
        package = zipfile.ZipFile(io.BytesIO(data))
        members = package.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as exc:
        raise Unreadable(f"not a readable {kind}", category=CORRUPT) from exc
    check_package(members, kind)
    return package


def check_package(members: list[zipfile.ZipInfo], kind: str) -> None:
    if len(members) > MAX_MEMBERS:
        raise Unreadable(f"{kind} holds more than {MAX_MEMBERS} parts", category=TOO_LARGE)
    if any(member.file_size > MAX_MEMBER_BYTES for member in members):
        raise Unreadable(f"{kind} has a part over {MAX_MEMBER_BYTES >> 20} MiB unpacked", category=TOO_LARGE)
    if sum(member.file_size for member in members) > MAX_UNPACKED_BYTES:
        raise Unreadable(f"{kind} unpacks to over {MAX_UNPACKED_BYTES >> 20} MiB", category=TOO_LARGE)


def read_member(package: zipfile.ZipFile, name: str, kind: str) -> bytes:
    """One member's bytes, or `Unreadable` (corrupt) when it is missing or damaged."""
    try:
        return package.read(name)
    except (KeyError, zipfile.BadZipFile, ValueError, OSError, EOFError, NotImplementedError) as exc:
        raise Unreadable(f"not a readable {kind}", category=CORRUPT) from exc


def parse_xml(data: bytes, kind: str):
    """An lxml element tree of ``data``, refusing entity expansion, DTD loading and huge trees.

    libxml2's limits without ``huge_tree`` (nesting 256 deep, 10 MB a text node) turn a nesting
    bomb into a syntax error, and entities are never expanded: `Unreadable` (corrupt) either way."""
    from lxml import etree

    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False, huge_tree=False)
    try:
        return etree.fromstring(data, parser)
    except (etree.XMLSyntaxError, ValueError) as exc:
        raise Unreadable(f"not a readable {kind}", category=CORRUPT) from exc
