"""Write the sample documents of the fictional Northwind Robotics handbook next to this file.

Run it standalone (``python collections_app/samples.py``). The Markdown, text and HTML
files are written from the strings below; ``benefits.docx`` is made with python-docx and
``safety.pdf`` with `pdf_bytes`, a deliberately small PDF writer: one standard Type1 font, a text
layer pypdf can extract, nothing else. Outputs are byte-for-byte reproducible, so regenerating
them leaves the committed copies unchanged unless the content changed.

Every document states facts the others do not, so a search test can tell which one answered.
"""

from __future__ import annotations

import io
import textwrap
import zipfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent / "sample_docs"

HANDBOOK_MD = """\
# Northwind Robotics Employee Handbook

This handbook explains how we work together at Northwind Robotics. It covers time off, spending
company money, keeping our systems safe and working away from the office. Where a team has its own
rules, the stricter of the two applies.

## Leave policy

Every full-time employee earns 25 days of paid annual leave per calendar year, accrued monthly.
Part-time staff earn leave in proportion to their contracted hours.

Carry-over is capped at five days. Unused days above that limit lapse on 31 March of the following
year, and they are not paid out.

A request for more than ten consecutive working days needs approval from your team lead at least
four weeks before the first day away. Shorter requests need one week of notice.

### Sick leave

Sick leave is separate from annual leave and is not limited to a number of days. Tell your team lead
before 09:30 on the first morning you are unwell. From the fourth day a doctor's note is required.

## Expenses

Claims are submitted through the finance portal within 30 days of the purchase. A receipt is
required for any single item above 25 euros.

Client meals are reimbursed up to 60 euros per person, tip included. Alcohol is never reimbursed,
whoever is at the table.

## Security

Laptops must use full-disk encryption. The screen locks after five minutes without input, and the
lock may not be switched off.

Passwords are at least 14 characters long and are kept in the company password manager, never in a
browser or a notebook. USB storage devices are blocked on every company machine.

A lost or stolen device is reported to the security desk within one hour, by phone on extension
4400, even outside working hours.

## Remote work

After probation, staff may work remotely up to three days a week. Core hours are 10:00 to 15:00,
during which everyone is reachable on chat.

A one-time home office allowance of 400 euros covers a desk, a chair or a monitor. Working from
another country is allowed for at most 20 working days per year and must be agreed with HR first.
"""

ONBOARDING_TXT = """\
WELCOME TO NORTHWIND ROBOTICS - YOUR FIRST WEEK

Your first day starts at 09:00 at the main reception in Building A. Your badge is collected from
reception on the first morning; bring a photo ID so the guard can issue it.

Every newcomer is paired with an onboarding buddy from a neighbouring team. The buddy is your first
contact for small questions during the first three months.

ACCOUNTS AND EQUIPMENT

IT activates your accounts before 10:00 on day one. Your laptop is handed over at the IT counter on
the second floor, already encrypted and enrolled in device management.

SAFETY INDUCTION

Nobody enters the workshop or the robot test hall before completing the safety induction. It takes
two hours and runs every Tuesday at 13:00.

PROBATION

The probation period lasts six months. A review meeting with your team lead is held at the end of
the third month and again before probation ends.
"""

TRAVEL_HTML = """\
<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Travel policy - Northwind Robotics intranet</title>
<style>body { font-family: sans-serif; } h1 { color: #035; }</style>
<script>window.analyticsId = "do-not-index-this-script";</script>
</head>
<body>
<nav><a href="/">Intranet home</a></nav>
<h1>Travel policy</h1>
<p>This page applies to every business trip, whether to a customer site, a trade fair or
another Northwind&nbsp;Robotics office.</p>

<h2>Booking</h2>
<p>Trips are booked through the travel desk at least 14 days before departure. Economy class is
used for flights shorter than six hours; for longer flights premium economy may be booked.</p>

<h2>Mileage</h2>
<p>Mileage is reimbursed at 0.42 per kilometre when you use your own car for a business trip.
Commuting between home and your usual office is not a business trip.</p>

<h2>Hotels &amp; meals</h2>
<ul>
<li>Hotels up to 150 euros per night in most cities.</li>
<li>Hotels up to 220 euros per night in London, Paris and Zurich.</li>
<li>Breakfast is included in the room rate wherever possible.</li>
</ul>

<h2>Daily allowance</h2>
<table>
<tr><th>Country</th><th>Allowance per day</th></tr>
<tr><td>Germany</td><td>28 euros</td></tr>
<tr><td>France</td><td>32 euros</td></tr>
<tr><td>Japan</td><td>41 euros</td></tr>
</table>
<footer><p>Questions? Write to the travel desk.</p></footer>
</body>
</html>
"""

BENEFITS = {
    "title": "Northwind Robotics Benefits",
    "intro": (
        "Benefits start on your first working day and end on your last. This document lists what "
        "the company pays for on top of your salary."
    ),
    "sections": [
        (
            "Pension",
            1,
            [
                "The company matches your pension contribution up to 6 percent of your gross salary. "
                "Contributions above 6 percent are welcome but are not matched."
            ],
        ),
        (
            "Health cover",
            1,
            [
                "Private health insurance covers you, your partner and your children under 25. Dental "
                "treatment is covered up to 1,200 euros per person per year."
            ],
        ),
        (
            "Gym subsidy",
            2,
            ["A gym subsidy of 30 euros per month is paid with your salary when you show a membership."],
        ),
        (
            "Bicycle leasing",
            2,
            [
                "You may lease one bicycle or e-bike through salary conversion. The lease runs for 36 "
                "months and includes insurance against theft."
            ],
        ),
    ],
    "table_heading": "Benefits at a glance",
    "table": [
        ("Benefit", "Company pays", "Who is covered"),
        ("Pension match", "up to 6 percent", "employee"),
        ("Health insurance", "full premium", "employee, partner, children"),
        ("Gym subsidy", "30 euros per month", "employee"),
    ],
}

SAFETY_PAGES = [
    [
        ("h", "Workshop and Robot Hall Safety Rules"),
        (
            "p",
            "These rules apply to everyone who enters the workshop or the robot test hall, including "
            "visitors and contractors. A breach is a disciplinary matter.",
        ),
        ("h", "Protective equipment"),
        (
            "p",
            "Safety glasses are mandatory at all times in the workshop. Steel-toed shoes are required "
            "in the robot test hall. Gloves are never worn near rotating tools.",
        ),
        ("h", "Entering a robot cell"),
        (
            "p",
            "Before anyone enters a robot cell, the robot is stopped with the red emergency stop and "
            "the cell is locked out with your personal padlock. Only the person who fitted a padlock "
            "may remove it.",
        ),
    ],
    [
        ("h", "Incidents"),
        (
            "p",
            "Every incident and near miss is reported to the safety officer within 24 hours, even "
            "when nobody was hurt. Reports are used to improve the rules, never to blame.",
        ),
        ("h", "Fire"),
        (
            "p",
            "When the fire alarm sounds, leave by the nearest exit and go to the assembly point in "
            "car park B. Do not use the lifts. Each floor has two trained first aiders, named on the "
            "notice board by the stairs.",
        ),
    ],
]

# A fixed timestamp for the DOCX package members and its core properties, for reproducible output.
_FIXED_TIME = (2025, 1, 1, 0, 0, 0)


def pdf_bytes(pages: Sequence[Sequence[tuple[str, str]]]) -> bytes:
    """A minimal PDF: one A4 page per item of ``pages``, each a list of ("h"|"p"|"t", text) blocks.

    Headings are set in Helvetica-Bold, paragraphs in Helvetica, tables ("t": rows on lines, cells
    split by tabs) cell by cell at their columns' places; Helvetica is a standard Type1 font, with
    WinAnsi encoding, so there is a real text layer. A page with no blocks has an empty content
    stream: a page without a text layer, as a scan would be.
    """
    objects: list[bytes] = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",  # the page tree, filled in once the pages' object numbers are known
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica-Bold /Encoding /WinAnsiEncoding >>",
    ]
    page_numbers: list[int] = []
    for blocks in pages:
        stream = _page_stream(blocks)
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        content_number = len(objects)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] "
            b"/Resources << /Font << /F1 3 0 R /F2 4 0 R >> >> /Contents %d 0 R >>" % content_number
        )
        page_numbers.append(len(objects))
    kids = b" ".join(b"%d 0 R" % number for number in page_numbers)
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, len(page_numbers))

    out = io.BytesIO()
    out.write(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets: list[int] = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref_at = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref_at))
    return out.getvalue()


def scanned_pdf_bytes(pdf: bytes, *, pages: Sequence[int] | None = None, dpi: int = 200) -> bytes:
    """``pdf`` with the pages numbered in ``pages`` (1-based; None: all) replaced by pictures of themselves.

    Each such page is rendered (pypdfium2, grey) and stored as one FlateDecode image filling the page,
    with no text layer: what a scanner gives. The other pages keep their text. For tests and benchmarks
    of OCR: the text the scan shows is known exactly."""
    import zlib

    import pypdfium2
    from pypdf import PdfReader, PdfWriter
    from pypdf.generic import ContentStream, DecodedStreamObject, DictionaryObject, NameObject, NumberObject

    source = pypdfium2.PdfDocument(pdf)
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    wanted = set(range(1, len(source) + 1)) if pages is None else set(pages)
    for number in sorted(wanted):
        page = source[number - 1]
        width, height = page.get_size()
        image = page.render(scale=dpi / 72, grayscale=True).to_pil().convert("L")
        page.close()
        picture = DecodedStreamObject()
        picture.set_data(zlib.compress(image.tobytes(), 6))
        picture.update(
            {
                NameObject("/Type"): NameObject("/XObject"),
                NameObject("/Subtype"): NameObject("/Image"),
                NameObject("/Width"): NumberObject(image.width),
                NameObject("/Height"): NumberObject(image.height),
                NameObject("/ColorSpace"): NameObject("/DeviceGray"),
                NameObject("/BitsPerComponent"): NumberObject(8),
                NameObject("/Filter"): NameObject("/FlateDecode"),
            }
        )
        target = writer.pages[number - 1]
        draw = ContentStream(None, writer)
        draw.set_data(b"q %g 0 0 %g 0 0 cm /Scan Do Q" % (width, height))
        target[NameObject("/Contents")] = writer._add_object(draw)
        target[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/XObject"): DictionaryObject({NameObject("/Scan"): writer._add_object(picture)})}
        )
    source.close()
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def with_outline(pdf: bytes, entries: Sequence[tuple[str, int, int]]) -> bytes:
    """``pdf`` with an outline (bookmarks): (title, 1-based page, depth) entries, depth 0 at the top."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    parents: list = []
    for title, page, depth in entries:
        del parents[depth:]
        parents.append(
            writer.add_outline_item(
                title=title, page_number=page - 1, parent=parents[-1] if parents else None
            )
        )
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def _page_stream(blocks: Sequence[tuple[str, str]]) -> bytes:
    if not blocks:
        return b""
    commands = [b"BT", b"16 TL", b"56 786 Td"]
    y = 786  # where the next line is set: each T* moves down 16pt
    for kind, text in blocks:
        if kind == "t":
            y = _table_commands(commands, text, y)
            continue
        bold = kind == "h"
        commands.append(b"/F2 14 Tf" if bold else b"/F1 11 Tf")
        # Helvetica 11pt averages about 5.5pt a character; 86 characters fill the 483pt text width.
        for line in textwrap.wrap(text, 60 if bold else 86):
            commands.append(_pdf_string(line) + b" Tj T*")
            y -= 16
        commands.append(b"T*")  # a blank line between blocks
        y -= 16
    commands.append(b"ET")
    return b"\n".join(commands)


def _table_commands(commands: list[bytes], text: str, y: int) -> int:
    """A ("t", text) block: rows on lines, cells split by tabs, each cell placed at its column's x as a
    word processor sets a table (header in bold, numbers right-aligned); returns the next line's y."""
    rows = [line.split("\t") for line in text.split("\n")]
    widths = [max(len(row[c]) if c < len(row) else 0 for row in rows) for c in range(len(rows[0]))]
    numeric = [
        all(row[c].replace(",", "").replace(".", "").isdigit() for row in rows[1:] if c < len(row) and row[c])
        for c in range(len(widths))
    ]
    commands.append(b"ET")
    for number, row in enumerate(rows):
        x = 56.0
        for column, cell in enumerate(row):
            # Helvetica 10pt: about 5pt a character; a right-aligned cell ends where its column does.
            at = x + (widths[column] - len(cell)) * 5 if numeric[column] else x
            font = b"/F2 10 Tf" if number == 0 else b"/F1 10 Tf"
            commands.append(b"BT " + font + b" 1 0 0 1 %.1f %d Tm " % (at, y) + _pdf_string(cell) + b" Tj ET")
            x += widths[column] * 5 + 20
        y -= 14
    y -= 16
    commands += [b"BT", b"16 TL", b"1 0 0 1 56 %d Tm" % y]
    return y


def _pdf_string(text: str) -> bytes:
    escaped = bytearray(b"(")
    for byte in text.encode("cp1252", errors="replace"):
        if byte in b"()\\":
            escaped += b"\\" + bytes([byte])
        elif byte < 0x20 or byte > 0x7E:
            escaped += b"\\%03o" % byte
        else:
            escaped.append(byte)
    return bytes(escaped + b")")


def docx_bytes() -> bytes:
    """The benefits document: a title, headings of two levels, paragraphs and a table."""
    import docx

    document = docx.Document()
    document.core_properties.created = datetime(*_FIXED_TIME)
    document.core_properties.modified = datetime(*_FIXED_TIME)
    document.core_properties.author = "Northwind Robotics HR"
    document.add_heading(BENEFITS["title"], level=0)
    document.add_paragraph(BENEFITS["intro"])
    for heading, level, paragraphs in BENEFITS["sections"]:
        document.add_heading(heading, level=level)
        for paragraph in paragraphs:
            document.add_paragraph(paragraph)
    document.add_heading(BENEFITS["table_heading"], level=1)
    rows = BENEFITS["table"]
    table = document.add_table(rows=len(rows), cols=len(rows[0]))
    for row, values in zip(table.rows, rows, strict=True):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    document.add_paragraph("Questions about benefits go to the HR service desk.")
    raw = io.BytesIO()
    document.save(raw)
    return _fixed_zip(raw.getvalue())


def _fixed_zip(data: bytes) -> bytes:
    """The same zip with every member's timestamp fixed, so that saving twice gives equal bytes."""
    out = io.BytesIO()
    with (
        zipfile.ZipFile(io.BytesIO(data)) as source,
        zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as target,
    ):
        for info in source.infolist():
            member = zipfile.ZipInfo(info.filename, date_time=_FIXED_TIME)
            member.compress_type = zipfile.ZIP_DEFLATED
            target.writestr(member, source.read(info.filename))
    return out.getvalue()


def main() -> None:
    """Write every sample document next to this file."""
    (HERE / "handbook.md").write_text(HANDBOOK_MD, encoding="utf-8")
    (HERE / "onboarding.txt").write_text(ONBOARDING_TXT, encoding="utf-8")
    (HERE / "travel-policy.html").write_text(TRAVEL_HTML, encoding="utf-8")
    (HERE / "benefits.docx").write_bytes(docx_bytes())
    (HERE / "safety.pdf").write_bytes(pdf_bytes(SAFETY_PAGES))


if __name__ == "__main__":
    main()
