"""Slides, spreadsheets, CSV, e-books and OpenDocument: each read into sections with its pages, and
each refused by category, quickly, when it is damaged or built to exhaust the reader."""

import io
import time
import zipfile

import pytest

from collections_app.text import reading, sheets, tables
from collections_app.text.blocks import page_range
from collections_app.text.extract import Unreadable, extract
from collections_app.text.reading import MAX_TEXT_CHARS
from tests.office_files import csv_bytes, epub_bytes, odf_bytes, pptx_bytes, xlsx_bytes, zip_bomb


def category_of(name: str, data: bytes) -> str:
    with pytest.raises(Unreadable) as caught:
        extract(name, data)
    return caught.value.category


def pages_of(extracted, needle: str) -> tuple[int | None, int | None]:
    start = extracted.text.index(needle)
    return page_range(extracted.pages, start, start + len(needle))


# --- PowerPoint ----------------------------------------------------------------------------------


def test_each_slide_is_a_section_titled_by_its_number_and_title_with_its_notes():
    deck = pptx_bytes(
        [
            {
                "title": "Quarterly results",
                "lines": ["Revenue grew 12%", "Costs fell"],
                "notes": "Mention Berlin.",
            },
            {"lines": ["A slide without a title"], "table": [["Region", "Sales"], ["North", "40"]]},
        ]
    )
    extracted = extract("deck.pptx", deck)
    assert extracted.text == (
        "# Slide 1: Quarterly results\n\nRevenue grew 12%\nCosts fell\n\nNotes: Mention Berlin.\n\n"
        "# Slide 2\n\nA slide without a title\n\n| Region | Sales |\n| --- | --- |\n| North | 40 |"
    )
    assert pages_of(extracted, "Mention Berlin.") == (1, 1)
    assert pages_of(extracted, "| North | 40 |") == (2, 2)
    assert pages_of(extracted, "Costs fell\n\nNotes: Mention Berlin.\n\n# Slide 2\n\nA slide") == (1, 2)


def test_a_damaged_deck_is_corrupt():
    assert category_of("deck.pptx", pptx_bytes([{"title": "x"}])[:2000]) == "corrupt"


# --- Excel and CSV -------------------------------------------------------------------------------


def test_each_sheet_is_a_section_and_a_page_whose_rows_carry_their_header():
    workbook = xlsx_bytes(
        {
            "Staff": [
                ["Name", "Department", "Phone"],
                ["Alice", "Sales", "555-0101"],
                [None, None, None],
                ["Bob", "Legal", "555-0199"],
            ],
            "Rooms": [["Room", "Seats"], ["Oak", 12]],
        }
    )
    extracted = extract("book.xlsx", workbook)
    assert extracted.text == (
        "# Staff\n\n| Name | Department | Phone |\n| --- | --- | --- |\n| Alice | Sales | 555-0101 |\n"
        "| Bob | Legal | 555-0199 |\n\n# Rooms\n\n| Room | Seats |\n| --- | --- |\n| Oak | 12 |"
    )
    assert pages_of(extracted, "| Bob | Legal | 555-0199 |") == (1, 1)
    assert pages_of(extracted, "| Oak | 12 |") == (2, 2)  # the workbook's second sheet
    assert pages_of(extracted, "555-0199 |\n\n# Rooms") == (1, 2)


def test_a_formula_gives_the_value_the_spreadsheet_last_showed_not_its_source():
    from openpyxl import Workbook, load_workbook

    book = Workbook()
    book.active.append(["Item", "Total"])
    book.active.append(["Pens", "=2+3"])
    out = io.BytesIO()
    book.save(out)
    # A file saved by Excel holds the formula's cached value; openpyxl writes none, so the cell reads empty.
    assert "=2+3" not in extract("f.xlsx", out.getvalue()).text
    assert load_workbook(io.BytesIO(out.getvalue()))["Sheet"]["B2"].value == "=2+3"


def test_formulas_with_no_saved_value_are_noted_per_sheet_and_saved_ones_are_not():
    """An empty Total column must not be silent: each sheet says how many formulas read as empty."""
    sheets = {
        "Budget": [
            ["Item", "Price", "Count", "Total"],
            ["Laptop", 1450, 40, "=B2*C2"],
            ["Pen", 2, 9, "=B3*C3"],
        ],
        "Notes": [["Topic"], ["Laptops are replaced every four years"]],
    }
    extracted = extract("it-budget.xlsx", xlsx_bytes(sheets))
    assert extracted.notes == [
        "sheet 'Budget': 2 formula cells with no saved value read as empty (the file was never opened in a "
        "spreadsheet program); open and save it in Excel or LibreOffice to have them read"
    ]
    assert extracted.warnings == []  # a note, not a reason to hold the document back for review
    # The same workbook as a spreadsheet program saves it, the values cached beside the formulas: silent.
    saved = _with_cached_values(xlsx_bytes(sheets), {"B2*C2": "58000", "B3*C3": "18"})
    cached = extract("it-budget.xlsx", saved)
    assert cached.notes == [] and "| Laptop | 1450 | 40 | 58000 |" in cached.text


def _with_cached_values(data: bytes, values: dict[str, str]) -> bytes:
    """The workbook with a cached <v> after each named formula, as Excel writes it."""
    import re
    import zipfile

    source, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as target:
        for info in source.infolist():
            body = source.read(info)
            if info.filename.startswith("xl/worksheets/"):
                for formula, value in values.items():
                    body = re.sub(
                        rb"<f>" + re.escape(formula.encode()) + rb"</f>(<v\s*/>|<v></v>)?",
                        b"<f>" + formula.encode() + b"</f><v>" + value.encode() + b"</v>",
                        body,
                    )
            target.writestr(info, body)
    return out.getvalue()


def test_a_long_table_is_divided_between_rows_and_every_block_repeats_the_header():
    rows = [["Code", "Meaning"]]
    rows += [[f"E{n:04d}", f"error number {n} means the pump stalled"] for n in range(200)]
    extracted = extract("codes.csv", csv_bytes(rows))
    blocks = extracted.text.split("\n\n")
    assert len(blocks) > 3
    for block in blocks:
        lines = block.split("\n")
        assert lines[:2] == ["| Code | Meaning |", "| --- | --- |"]
        assert len(block) <= tables.BLOCK_CHARS
        assert all(line.startswith("| ") and line.endswith(" |") for line in lines)
    kept = [line for block in blocks for line in block.split("\n")[2:]]
    assert kept == [f"| E{n:04d} | error number {n} means the pump stalled |" for n in range(200)]
    assert extracted.pages == ()  # a CSV file is one sheet, with no pages to cite


def test_csv_dialect_is_sniffed_and_pipes_in_cells_are_escaped():
    extracted = extract("a.csv", csv_bytes([["Name", "Dept"], ["Ann", "HR|Payroll"]], delimiter=";"))
    assert extracted.text == "| Name | Dept |\n| --- | --- |\n| Ann | HR\\|Payroll |"


def test_csv_that_is_not_utf8_is_refused_and_a_huge_field_is_corrupt():
    assert category_of("a.csv", "Name\ncafé".encode("latin-1")) == "unsupported type"
    assert category_of("a.csv", b'a,b\n"' + b"x" * 200_000 + b'",1\n') == "corrupt"


def test_cells_and_columns_are_bounded():
    long_cell = "word " * 400
    rows = [[f"c{n}" for n in range(100)], [long_cell] + ["v"] * 99]
    text = extract("wide.csv", csv_bytes(rows)).text
    header, _rule, row = text.split("\n")
    assert header.count("|") == tables.MAX_COLUMNS + 1
    assert len(row.split(" | ")[0]) <= tables.MAX_CELL_CHARS + 2
    assert "…" in row


def test_a_huge_sheet_stops_at_the_stated_bounds_quickly(monkeypatch):
    monkeypatch.setattr(sheets, "MAX_ROWS", 5000)
    rows = [["id", "value"]] + [[n, n * 2] for n in range(50_000)]
    started = time.monotonic()
    extracted = extract("big.xlsx", xlsx_bytes({"Data": rows}))
    assert time.monotonic() - started < 60
    assert "| 4998 | 9996 |" in extracted.text and "| 4999 |" not in extracted.text  # row 5000 is the last


def test_text_past_the_document_limit_is_left_out_with_a_note():
    rows = [["id", "text"]] + [[n, "lorem ipsum dolor sit amet " * 3] for n in range(60_000)]
    extracted = extract("huge.csv", csv_bytes(rows))
    assert len(extracted.text) <= MAX_TEXT_CHARS
    assert extracted.notes == [f"only its first {MAX_TEXT_CHARS:,} characters were read"]
    assert extracted.text.endswith(" |")  # cut after a whole row


# --- EPUB ----------------------------------------------------------------------------------------


def test_an_epub_is_read_in_spine_order_and_a_chapter_without_a_heading_is_headed_by_its_title():
    book = epub_bytes(
        [
            ("Chapter One", "<h1>Beginnings</h1><p>It was a dark night.</p>"),
            ("Interlude", "<p>No heading here.</p>"),
        ]
    )
    # epub_bytes lists the spine in reverse, so the reading order is not the order of the files.
    expected = "# Interlude\n\nNo heading here.\n\n# Beginnings\n\nIt was a dark night."
    assert extract("b.epub", book).text == expected


def test_an_encrypted_epub_is_refused_as_encrypted_and_a_broken_one_as_corrupt():
    assert category_of("b.epub", epub_bytes([("One", "<p>x</p>")], encrypted=True)) == "encrypted"
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as book:
        book.writestr("mimetype", "application/epub+zip")
    assert category_of("b.epub", out.getvalue()) == "corrupt"


# --- OpenDocument --------------------------------------------------------------------------------


def test_an_odt_keeps_headings_lists_and_tables():
    body = (
        '<text:h text:outline-level="2">Leave</text:h><text:p>Staff get <text:span>ten</text:span>'
        '<text:s text:c="3"/>days.</text:p><text:list><text:list-item><text:p>Ask first</text:p>'
        "</text:list-item></text:list><table:table><table:table-row><table:table-cell><text:p>Kind</text:p>"
        "</table:table-cell><table:table-cell><text:p>Days</text:p></table:table-cell></table:table-row>"
        "<table:table-row><table:table-cell><text:p>Sick</text:p></table:table-cell><table:table-cell>"
        "<text:p>5</text:p></table:table-cell></table:table-row></table:table>"
    )
    assert extract("p.odt", odf_bytes(body)).text == (
        "## Leave\n\nStaff get ten days.\n\nAsk first\n\n| Kind | Days |\n| --- | --- |\n| Sick | 5 |"
    )


def test_an_odp_is_read_slide_by_slide_with_notes_and_slide_numbers():
    body = (
        '<draw:page><draw:frame presentation:class="title"><draw:text-box><text:p>Hello</text:p>'
        "</draw:text-box></draw:frame><draw:frame><draw:text-box><text:p>Point A</text:p></draw:text-box>"
        "</draw:frame><presentation:notes><draw:frame><draw:text-box><text:p>say hi</text:p>"
        "</draw:text-box></draw:frame></presentation:notes></draw:page><draw:page><draw:frame>"
        "<draw:text-box><text:p>Second</text:p></draw:text-box></draw:frame></draw:page>"
    )
    extracted = extract("d.odp", odf_bytes(body, kind="presentation"))
    assert extracted.text == "# Slide 1: Hello\n\nPoint A\n\nNotes: say hi\n\n# Slide 2\n\nSecond"
    assert pages_of(extracted, "Second") == (2, 2)


def test_repeated_cells_and_rows_expand_only_to_the_table_limits():
    row = (
        '<table:table-row table:number-rows-repeated="1000000"><table:table-cell '
        'table:number-columns-repeated="16384"><text:p>x</text:p></table:table-cell></table:table-row>'
    )
    started = time.monotonic()
    text = extract("r.odt", odf_bytes(f"<table:table>{row}</table:table>")).text
    assert time.monotonic() - started < 20
    blocks = [block.split("\n") for block in text.split("\n\n")]
    assert blocks[0][0].count("|") == tables.MAX_COLUMNS + 1
    assert sum(len(lines) - 2 for lines in blocks) == 99  # the header is the first of MAX_REPEATED_ROWS


# --- hostile packages ----------------------------------------------------------------------------


XML_BOMBS = {
    "nested": lambda: ("<text:section>" * 50_000) + "<text:p>x</text:p>" + ("</text:section>" * 50_000),
}


def test_deeply_nested_xml_is_refused_as_corrupt_at_once():
    started = time.monotonic()
    assert category_of("n.odt", odf_bytes(XML_BOMBS["nested"]())) == "corrupt"
    assert time.monotonic() - started < 10


def test_entities_are_never_expanded():
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa">'
        '<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
        '<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;"><!ENTITY d "&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;">]>'
        '<office:document-content xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
        'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"><office:body><office:text>'
        "<text:p>before &d; after</text:p></office:text></office:body></office:document-content>"
    )
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as package:
        package.writestr("content.xml", laughs)
    assert "aaaaaaaaaa" not in extract("l.odt", out.getvalue()).text


@pytest.mark.parametrize(
    ("name", "member"),
    [
        ("bomb.pptx", "ppt/slides/slide1.xml"),
        ("bomb.xlsx", "xl/worksheets/sheet1.xml"),
        ("bomb.epub", "OEBPS/c0.xhtml"),
        ("bomb.odt", "content.xml"),
        ("bomb.docx", "word/document.xml"),
    ],
)
def test_a_zip_bomb_of_every_package_format_is_too_large_before_it_is_inflated(tmp_path, name, member):
    data = zip_bomb(tmp_path / name, member=member, declared_mb=300).read_bytes()
    assert len(data) < 2 * 1024 * 1024
    started = time.monotonic()
    assert category_of(name, data) == "too large"
    assert time.monotonic() - started < 5


def test_a_package_of_too_many_parts_is_too_large():
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as package:
        for n in range(reading.MAX_MEMBERS + 1):
            package.writestr(f"p{n}", "")
    assert category_of("many.xlsx", out.getvalue()) == "too large"


def test_pages_and_notes_come_back_through_the_bounded_child():
    from collections_app.text.bounded import BoundedExtractor, Limits

    extractor = BoundedExtractor(Limits(seconds=60, memory_bytes=1024 * 1024 * 1024))
    try:
        deck = extractor.extract(
            "deck.pptx", pptx_bytes([{"title": "One"}, {"title": "Two", "lines": ["x"]}])
        )
        rows = [["id", "text"]] + [[n, "lorem ipsum dolor sit amet " * 3] for n in range(60_000)]
        huge = extractor.extract("huge.csv", csv_bytes(rows))
    finally:
        extractor.close()
    assert deck == extract("deck.pptx", pptx_bytes([{"title": "One"}, {"title": "Two", "lines": ["x"]}]))
    assert [mark.page for mark in deck.pages] == [1, 2]
    assert huge.notes == [f"only its first {MAX_TEXT_CHARS:,} characters were read"]
