"""What every format's reader shares: the refusal vocabulary, the bounds of reading, zip and XML guards.

Pure: no models, no settings. A reader turns a document's bytes into `blocks.Block`s (some text and
the page, slide or sheet it is on), which `extract` keeps `within_limit` and joins with
`blocks.join_blocks`, the page carrier. The readers for PDF, images, DOCX and text live in `extract`
(PDF's in `pdf`); each newer one has its own module (`html`, `slides`, `sheets`, `epub`, `odf`), and
`extract` holds the one table of suffixes.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterable

from .blocks import Block, tidy

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
NEEDS_OCR = (
    "needs OCR (not installed)"  # a scan or an image, on a machine without Tesseract (or its language)
)
REFUSAL_REASONS = (
    CORRUPT,
    ENCRYPTED,
    NO_TEXT_LAYER,
    UNSUPPORTED_TYPE,
    TOO_LARGE,
    EMPTY,
    TIMED_OUT,
    BAD_NAME,
    NEEDS_OCR,
)

# The stated bounds of reading one document (docs/collections.md, "Limits of each format").
# Text kept per document: about a 1,500-page book. Far more than the 240 paragraphs the structure
# strategy keeps, so it cuts only what no strategy would index well, and it bounds what the build
# worker holds and chunks for any single file.
MAX_TEXT_CHARS = 4_000_000
# A zip package (DOCX, PPTX, XLSX, EPUB, OpenDocument): what its directory declares, checked before
# any member is inflated. zipfile stops a member at its declared size (and fails its CRC if the
# member lied), so the declared sizes bound what a reader can be made to unpack.
MAX_UNPACKED_BYTES = 256 * 1024 * 1024
MAX_MEMBER_BYTES = 64 * 1024 * 1024
MAX_MEMBERS = 10_000


class Note(str):
    """A reader's remark on a document it did read (a declaration it set aside), told on the build
    without sending the document to review as a scan warning would (`extract` sorts them out)."""


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


class Kept(list):
    """The blocks `within_limit` kept; ``cut`` when text past the limit was left out."""

    cut = False


def within_limit(blocks: Iterable[Block], limit: int) -> Kept:
    """The blocks while their text fits in ``limit`` characters, the last one cut at a line end.

    Blocks are taken lazily, so a reader that yields them is never asked for more than fits; sizes
    count the blank line `blocks.join_blocks` puts between blocks."""
    kept, used = Kept(), 0
    for block in blocks:
        text = tidy(block.text)
        if not text:
            continue
        joined = used + (2 if kept else 0)
        if joined + len(text) > limit:
            room = limit - joined
            text = _cut_at_line(text, room) if room > 0 else ""
            if text:
                kept.append(Block(text, block.page))
            kept.cut = True
            break
        kept.append(Block(text, block.page))
        used = joined + len(text)
    return kept


def heading_block(heading: str, text: str, page: int | None = None, level: int = 1) -> Block:
    """A block of ``text`` under a Markdown heading (a slide's title, a sheet's name, a chapter's)."""
    title = " ".join(heading.split())
    head = f"{'#' * min(max(level, 1), 6)} {title}" if title else ""
    return Block("\n\n".join(x for x in (head, text) if x), page)


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


def _cut_at_line(text: str, room: int) -> str:
    line_end = text.rfind("\n", 0, room + 1)
    return text[: line_end if line_end > 0 else room].rstrip()
