"""Tables in a PDF come back as Markdown table rows, found in pypdf's layout text; prose, a table of
contents, two columns side by side and a listing in a fixed-pitch font stay text (issue 25 item 3)."""

from collections_app.samples import pdf_bytes
from collections_app.text.chunking import chunk
from collections_app.text.extract import extract
from collections_app.text.pdf_tables import MAX_LINES, find_tables

PARTS = (
    "Part\tDescription\tStock\tPrice\n"
    "A-100\tHex bolt M6 x 20, zinc plated\t1,200\t0.12\n"
    "A-101\tHex nut M6\t3,400\t0.04\n"
    "B-220\tBearing 608ZZ\t\t1.90\n"
    "C-7\tServo motor, 12 V\t85\t48.00"
)


def page_with(table: str) -> list[list[tuple[str, str]]]:
    return [
        [
            ("h", "Price list"),
            ("p", "The prices below hold until the end of March."),
            ("t", table),
            ("p", "Orders above the limit need a manager's approval."),
        ]
    ]


def test_a_table_is_read_as_markdown_rows_with_its_header_and_an_empty_cell_kept_in_its_column():
    extracted = extract("prices.pdf", pdf_bytes(page_with(PARTS)))
    text = extracted.text
    assert (
        "| Part | Description | Stock | Price |\n| --- | --- | --- | --- |\n"
        "| A-100 | Hex bolt M6 x 20, zinc plated | 1,200 | 0.12 |\n"
        "| A-101 | Hex nut M6 | 3,400 | 0.04 |\n"
        "| B-220 | Bearing 608ZZ |  | 1.90 |\n"
        "| C-7 | Servo motor, 12 V | 85 | 48.00 |"
    ) in text
    # The prose around the table is its own paragraphs, and the heading is still a heading.
    assert "# Price list" in text
    assert "The prices below hold until the end of March.\n\n| Part" in text
    assert "48.00 |\n\nOrders above the limit" in text


def test_a_long_table_is_divided_between_rows_each_piece_repeating_the_header():
    rows = "\n".join(f"Person {i}\t{100 + i}\t{2000 + i}\tEngineer grade {i % 4}" for i in range(45))
    text = extract("staff.pdf", pdf_bytes(page_with("Name\tRoom\tExtension\tRole\n" + rows))).text
    assert text.count("| Name | Room | Extension | Role |") >= 2
    pieces = [piece.text for piece in chunk(text, "structure", size=1800, overlap=180)]
    with_rows = [piece for piece in pieces if "| Person" in piece]
    assert len(with_rows) >= 2
    for piece in with_rows:
        assert "| Name | Room | Extension | Role |" in piece
        # No piece starts or ends inside a row.
        table_lines = [line for line in piece.splitlines() if line.startswith("|")]
        assert all(line.endswith("|") for line in table_lines)
    assert all(f"| Person {i} | {100 + i} | {2000 + i} |" in text for i in range(45))


def test_two_columns_side_by_side_stay_text():
    text = extract("settings.pdf", pdf_bytes(page_with("Setting\tValue\nTimeout\t30 s\nRetries\t3"))).text
    assert "|" not in text and "Timeout 30 s" in text


def test_a_listing_in_a_fixed_pitch_font_stays_text():
    # Helvetica swapped for Courier in place (same length, so the cross-reference table holds).
    data = pdf_bytes(page_with(PARTS)).replace(b"/BaseFont /Helvetica /", b"/BaseFont /Courier   /")
    text = extract("listing.pdf", data).text
    assert "| --- |" not in text and "A-101 Hex nut M6 3,400 0.04" in text


def test_prose_a_table_of_contents_and_a_two_column_page_are_not_tables():
    justified = (
        "The   notation   to   access   the   Group   type   of   the   Example   definition   is\n"
        "simply   the   name   of   the   type   followed   by   a   dot   and   the   field   name\n"
        "written   out   in   full,   as   the   examples   in   the   next   section   will   show"
    )
    contents = (
        "1    Introduction . . . . . . . . . . . . . . . . . .      1\n"
        "2    Structure handling . . . . . . . . . . . . . . .      2\n"
        "3    Utilities  . . . . . . . . . . . . . . . . . . .      5"
    )
    columns = "\n".join(
        f"{f'left column line {i} of some prose':<45}    right column line {i} of other prose"
        for i in range(8)
    )
    assert find_tables(justified) == [] and find_tables(contents) == [] and find_tables(columns) == []


def test_a_header_centred_apart_from_its_values_joins_their_column():
    layout = (
        "Part                 Description                   Stock                     Price\n"
        "      A-100        Hex bolt M6 x 20                       1,200                      0.12\n"
        "      A-101              Hex nut M6                       3,400                      0.04\n"
        "     B-220           Bearing 608ZZ                           85                      1.90"
    )
    (table,) = find_tables(layout)
    assert table.rows[0] == ["Part", "Description", "Stock", "Price"]
    assert table.rows[3] == ["B-220", "Bearing 608ZZ", "85", "1.90"]


def test_a_caption_above_and_a_note_below_are_left_out_of_the_table():
    layout = (
        "Table 2: stock by warehouse\n"
        "Part        North      South\n"
        "A-100       1,200      300\n"
        "A-101       3,400      12\n"
        "Stock is counted every Monday morning."
    )
    (table,) = find_tables(layout)
    assert [row[0] for row in table.rows] == ["Part", "A-100", "A-101"]


def test_a_page_of_too_many_lines_is_not_looked_at():
    row = "a        b        c"
    assert find_tables("\n".join([row] * (MAX_LINES + 1))) == []
    assert len(find_tables("\n".join([row] * MAX_LINES))[0].rows) == MAX_LINES


def test_a_cell_placed_far_off_the_page_is_read_as_text_without_a_huge_layout_line():
    import re

    data = pdf_bytes(page_with(PARTS))
    # Every Description cell moved 100 million points right: layout text would be that wide, but
    # pypdf caps a run of spaces at 10,000, and a line over MAX_LINE is not looked at for tables.
    cell = rb"1 0 0 1 (\d+\.\d) (\d+) Tm (\((?:Description|Hex|Bearing|Servo))"
    far = re.sub(cell, rb"1 0 0 1 99999999.0 \2 Tm \3", data)
    assert far != data
    text = extract("far.pdf", far).text
    assert "| --- |" not in text and "Bearing 608ZZ" in text
