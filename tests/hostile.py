"""Hostile documents, made on the fly (nothing large is committed): the review's zip-bomb DOCX,
looping PDF, sparse 200 MB file, non-UTF-8 name and over-long path."""

from __future__ import annotations

import os
import zipfile
import zlib
from pathlib import Path

_CONTENT_TYPES = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    '<Default Extension="xml" ContentType="application/xml"/>'
    '<Override PartName="/word/document.xml" '
    'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
    "</Types>"
)
_RELS = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
    '<Relationship Id="rId1" '
    'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" '
    'Target="word/document.xml"/></Relationships>'
)
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def zip_bomb_docx(path: Path, expanded_mb: int = 512) -> Path:
    """A DOCX of about a megabyte whose document.xml expands to `expanded_mb` MiB of one paragraph."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as package:
        package.writestr("[Content_Types].xml", _CONTENT_TYPES)
        package.writestr("_rels/.rels", _RELS)
        with package.open("word/document.xml", "w", force_zip64=True) as part:
            part.write(
                (
                    '<?xml version="1.0" encoding="UTF-8"?>'
                    f'<w:document xmlns:w="{_W}"><w:body><w:p><w:r><w:t>'
                ).encode()
            )
            block = b"a" * (1 << 20)
            for _ in range(expanded_mb):
                part.write(block)
            part.write(b"</w:t></w:r></w:p></w:body></w:document>")
    return path


def looping_pdf(path: Path, pages: int = 40, operators: int = 200_000) -> Path:
    """A small PDF whose pages all share one compressed content stream of `operators` text
    operators: tens of kilobytes on disk, minutes of work for a text extractor."""
    stream = zlib.compress(b"BT /F1 9 Tf " + b"1 0 0 1 10 10 Tm (x) Tj " * operators + b"ET", 9)
    kids = " ".join(f"{4 + i} 0 R" for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(stream) + stream + b"\nendstream",
    ]
    font = 4 + pages
    for _ in range(pages):
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R "
            f"/Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    path.write_bytes(bytes(out))
    return path


def sparse_file(path: Path, size: int = 200 * 1000 * 1000) -> Path:
    """A file of `size` bytes that takes no room on disk (a hole), made on the fly."""
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


def non_utf8_name(folder: Path, text: str = "Readable text under an undecodable name.") -> str:
    """A file whose name is not UTF-8 (the byte 0xff); returns the name as Python sees it."""
    raw = os.fsencode(folder) + b"/bad\xffname.md"
    with open(raw, "wb") as handle:
        handle.write(text.encode())
    return os.fsdecode(raw).rsplit("/", 1)[1]


def long_path(folder: Path, length: int = 600) -> str:
    """A file nested in directories so that its name relative to `folder` is `length` characters."""
    parts, used = [], 0
    while used + 201 < length - 10:
        parts.append("d" * 200)
        used += 201
    leaf = "f" * (length - used - 3) + ".md"
    target = folder.joinpath(*parts, leaf)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text("A document whose relative path is too long to store.")
    return "/".join([*parts, leaf])
