"""Office documents made in the test from their parts: decks, workbooks, CSV, e-books, OpenDocument.

Each maker returns the file's bytes. Decks and workbooks are written by the same libraries a
librarian's tools would use (python-pptx, openpyxl); EPUB and OpenDocument packages are zipped XML,
written here as the specifications lay them out.
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence


def pptx_bytes(slides: Sequence[dict]) -> bytes:
    """A deck: each slide {"title", "lines": [...], "notes", "table": [[...], ...]} (all optional)."""
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    for spec in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1 if spec.get("title") else 6])
        if spec.get("title"):
            slide.shapes.title.text = spec["title"]
            body = slide.placeholders[1].text_frame
            for index, line in enumerate(spec.get("lines", [])):
                (body.paragraphs[0] if index == 0 else body.add_paragraph()).text = line
        elif spec.get("lines"):
            box = slide.shapes.add_textbox(Inches(1), Inches(1), Inches(6), Inches(3)).text_frame
            box.text = "\n".join(spec["lines"])
        if spec.get("table"):
            rows = spec["table"]
            shape = slide.shapes.add_table(
                len(rows), len(rows[0]), Inches(1), Inches(4), Inches(6), Inches(2)
            )
            for r, row in enumerate(rows):
                for c, value in enumerate(row):
                    shape.table.cell(r, c).text = value
        if spec.get("notes"):
            slide.notes_slide.notes_text_frame.text = spec["notes"]
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def xlsx_bytes(sheets: dict[str, Sequence[Sequence[object]]], *, title: str = "") -> bytes:
    from openpyxl import Workbook

    workbook = Workbook()
    workbook.remove(workbook.active)
    for name, rows in sheets.items():
        sheet = workbook.create_sheet(name)
        for row in rows:
            sheet.append(list(row))
    if title:
        workbook.properties.title = title
    out = io.BytesIO()
    workbook.save(out)
    return out.getvalue()


def csv_bytes(rows: Sequence[Sequence[object]], *, delimiter: str = ",") -> bytes:
    import csv

    out = io.StringIO()
    csv.writer(out, delimiter=delimiter).writerows(rows)
    return out.getvalue().encode("utf-8")


def epub_bytes(chapters: Sequence[tuple[str, str]], *, encrypted: bool = False) -> bytes:
    """An EPUB 3 of (title, XHTML body) chapters, in spine order."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as book:
        book.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip")
        book.writestr(
            "META-INF/container.xml",
            '<?xml version="1.0"?><container version="1.0" '
            'xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>'
            '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
            "</rootfiles></container>",
        )
        if encrypted:
            book.writestr(
                "META-INF/encryption.xml",
                '<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container" '
                'xmlns:enc="http://www.w3.org/2001/04/xmlenc#"><enc:EncryptedData>'
                '<enc:CipherData><enc:CipherReference URI="OEBPS/c0.xhtml"/></enc:CipherData>'
                "</enc:EncryptedData></encryption>",
            )
        items = "".join(
            f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>'
            for i in range(len(chapters))
        )
        spine = "".join(f'<itemref idref="c{i}"/>' for i in reversed(range(len(chapters))))
        book.writestr(
            "OEBPS/content.opf",
            '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
            f"<metadata/><manifest>{items}</manifest><spine>{spine}</spine></package>",
        )
        for i, (title, body) in enumerate(chapters):
            book.writestr(
                f"OEBPS/c{i}.xhtml",
                '<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
                f"<head><title>{title}</title></head><body>{body}</body></html>",
            )
    return out.getvalue()


_ODF_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
    'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0"'
)


def odf_bytes(body: str, *, kind: str = "text") -> bytes:
    """An OpenDocument package whose office:body holds ``<office:{kind}>body</office:{kind}>``."""
    mimetype = {
        "text": "application/vnd.oasis.opendocument.text",
        "presentation": "application/vnd.oasis.opendocument.presentation",
    }[kind]
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as package:
        package.writestr(zipfile.ZipInfo("mimetype"), mimetype)
        package.writestr(
            "content.xml",
            f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_ODF_NS}>'
            f"<office:body><office:{kind}>{body}</office:{kind}></office:body>"
            "</office:document-content>",
        )
    return out.getvalue()


def zip_bomb(
    path,
    *,
    member: str,
    declared_mb: int = 300,
    prefix: bytes = b"",
    suffix: bytes = b"",
    base: dict[str, str] | None = None,
):
    """A package with small parts ``base`` and one ``member`` that inflates to ``declared_mb`` MiB."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=1) as package:
        for name, text in (base or {}).items():
            package.writestr(name, text)
        with package.open(member, "w", force_zip64=True) as part:
            part.write(prefix)
            block = b"a" * (1 << 20)
            for _ in range(declared_mb):
                part.write(block)
            part.write(suffix)
    return path
