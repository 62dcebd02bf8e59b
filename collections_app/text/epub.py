"""Reading EPUB e-books (EPUB 2 and 3) with the standard library's zipfile and the HTML reader.

Pure. The chapters are the package's spine (its reading order, from the OPF file that
``META-INF/container.xml`` points to), each read by `html.html_text`, so its headings are the
book's sections. A chapter whose text has no heading of its own is headed by its ``<title>``.
Encrypted (DRM) books are refused as encrypted. The package is checked against the zip limits
before anything is inflated; XML is parsed without entities or network access and with libxml2's
default depth and size limits, so a "billion laughs" or a nesting bomb is refused as corrupt.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator
from urllib.parse import unquote

from .blocks import Block
from .html import html_text
from .reading import (
    CORRUPT,
    ENCRYPTED,
    MAX_TEXT_CHARS,
    Unreadable,
    heading_block,
    open_package,
    parse_xml,
    read_member,
)

KIND = "EPUB book"
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_XHTML_TYPES = ("application/xhtml+xml", "text/html")


def read_epub(data: bytes, warnings: list[str]) -> Iterator[Block]:
    package = open_package(data, KIND)
    names = set(package.namelist())
    encryption = "META-INF/encryption.xml"
    if encryption in names and _encrypts_content(read_member(package, encryption, KIND)):
        raise Unreadable("encrypted", category=ENCRYPTED)
    opf_path = _opf_path(read_member(package, "META-INF/container.xml", KIND))
    opf = parse_xml(read_member(package, opf_path, KIND), KIND)
    base = posixpath.dirname(opf_path)
    manifest = {}
    for item in opf.iter("{*}item"):
        href, media = item.get("href"), item.get("media-type", "")
        if item.get("id") and href:
            manifest[item.get("id")] = (posixpath.normpath(posixpath.join(base, unquote(href))), media)
    size = 0
    for itemref in opf.iter("{*}itemref"):
        if size > MAX_TEXT_CHARS:
            return
        path, media = manifest.get(itemref.get("idref", ""), ("", ""))
        if media not in _XHTML_TYPES or path not in names:
            continue
        markup = read_member(package, path, KIND).decode("utf-8", "replace")
        try:
            text = html_text(markup, limit=MAX_TEXT_CHARS - size)
        except Unreadable:
            warnings.append(f"chapter {posixpath.basename(path)} could not be read")
            continue
        title_match = _TITLE.search(markup[:65536])
        title = " ".join(title_match.group(1).split()) if title_match else ""
        del markup
        has_heading = re.search(r"(?m)^#{1,6} ", text) is not None
        size += len(text)
        yield heading_block("" if has_heading else title, text)


def _opf_path(container: bytes) -> str:
    root = parse_xml(container, KIND)
    for rootfile in root.iter("{*}rootfile"):
        path = rootfile.get("full-path")
        if path:
            return unquote(path)
    raise Unreadable(f"not a readable {KIND} (no package file)", category=CORRUPT)


def _encrypts_content(encryption: bytes) -> bool:
    """True when encryption.xml encrypts more than fonts (font obfuscation leaves the text readable)."""
    root = parse_xml(encryption, KIND)
    for reference in root.iter("{*}CipherReference"):
        uri = reference.get("URI", "")
        if not uri.lower().endswith((".otf", ".ttf", ".woff", ".woff2")):
            return True
    return False
