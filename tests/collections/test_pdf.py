"""PDFs read as a person reads them: headings as sections, paragraphs, no running heads, pages kept."""

import pytest

from collections_app.samples import pdf_bytes, with_outline
from collections_app.text.blocks import Block, PageStart, join_blocks, page_range
from collections_app.text.chunking import chunk
from collections_app.text.extract import extract

MANUAL = [
    [
        ("p", "Northwind Robotics - Safety Manual"),
        ("h", "Protective equipment"),
        ("p", "Safety glasses are mandatory at all times in the workshop."),
        ("p", "Steel-toed shoes are required in the robot test hall."),
        ("p", "Page 1 of 4"),
    ],
    [
        ("p", "Northwind Robotics - Safety Manual"),
        ("h", "Robot cells"),
        ("p", "Before anyone enters a robot cell the robot is stopped with the red emergency stop."),
        ("p", "Page 2 of 4"),
    ],
    [
        ("p", "Northwind Robotics - Safety Manual"),
        ("h", "Incidents"),
        ("p", "Every near miss is reported to the safety officer within 24 hours."),
        ("p", "Page 3 of 4"),
    ],
    [
        ("p", "Northwind Robotics - Safety Manual"),
        ("h", "Fire"),
        ("p", "The assembly point is in car park B; the lifts are never used."),
        ("p", "Page 4 of 4"),
    ],
]


def test_bold_headings_become_sections_of_the_structure_strategy():
    text = extract("manual.pdf", pdf_bytes(MANUAL)).text
    sections = {piece.section for piece in chunk(text, "structure", size=200, overlap=0)}
    assert {"Protective equipment", "Robot cells", "Incidents", "Fire"} <= sections
    assert "# Robot cells" in text.splitlines()


def test_a_larger_font_ranks_above_a_bold_one():
    pages = [[("h", "Leave"), ("p", "Twenty five days a year."), ("p", "Carry over is capped at five days.")]]
    pages.insert(0, [("h", "Handbook")])
    # The first heading set larger, with room for it between the lines.
    pdf = pdf_bytes(pages).replace(b"/F2 14 Tf", b"/F2 22 Tf", 1).replace(b"16 TL", b"26 TL")
    lines = [line for line in extract("a.pdf", pdf).text.splitlines() if line.startswith("#")]
    assert lines == ["# Handbook", "## Leave"]


def test_the_outline_names_the_sections_when_there_is_one():
    # Every line in the body font: only the bookmarks say where the sections start.
    pages = [
        [("p", "Terms of employment"), ("p", "Hours are from nine to five on weekdays.")],
        [("p", "Overtime"), ("p", "Overtime is paid at one and a half times the hourly rate.")],
    ]
    pdf = with_outline(pdf_bytes(pages), [("Terms of employment", 1, 0), ("Overtime", 2, 1)])
    text = extract("terms.pdf", pdf).text
    assert "# Terms of employment" in text.splitlines() and "## Overtime" in text.splitlines()
    pieces = chunk(text, "structure", size=1800, overlap=0)
    assert [p.section for p in pieces if "one and a half" in p.text] == ["Overtime"]


def test_an_outline_title_not_printed_on_its_page_heads_that_page():
    pages = [
        [("p", "Hours are from nine to five on weekdays.")],
        [("p", "Overtime is paid at time and a half.")],
    ]
    text = extract("t.pdf", with_outline(pdf_bytes(pages), [("Pay", 2, 0)])).text
    assert text.splitlines()[text.splitlines().index("# Pay") + 2] == "Overtime is paid at time and a half."


def test_running_headers_and_footers_are_dropped_and_the_rest_kept():
    text = extract("manual.pdf", pdf_bytes(MANUAL)).text
    assert "Safety Manual" not in text and "of 4" not in text
    assert "Safety glasses are mandatory" in text and "car park B" in text


def test_a_line_on_only_some_pages_is_not_furniture():
    pages = [[("p", "Draft"), ("p", f"Rule {n} is about topic {n} and nothing else.")] for n in range(1, 6)]
    pages[0][0] = ("p", "Approved")
    text = extract("rules.pdf", pdf_bytes(pages)).text
    assert "Approved" in text and "Draft" not in text  # Draft is on 4 of 5 pages: furniture


def test_a_running_head_that_changes_with_the_chapter_and_bare_page_numbers_are_dropped():
    """A texinfo manual: "Chapter 3: Utilities 7" heads only its chapter's pages, and a chapter's first
    page prints its number alone, above the chapter's heading in the text layer."""
    pages = [[("p", "Contents of the manual, one page.")]]  # an unnumbered title page
    for chapter, title, count in ((1, "Introduction", 3), (2, "Utilities", 3), (3, "Reference", 4)):
        printed = len(pages)  # this chapter's first printed page number
        pages.append(
            [("p", str(printed)), ("h", f"{chapter} {title}"), ("p", f"{chapter}.1 Overview of {title}.")]
        )
        for k in range(1, count):
            pages.append(
                [
                    ("p", f"Chapter {chapter}: {title} {printed + k}"),
                    ("p", f"{chapter}.{k + 1} Details of {title.lower()}, part {k}, read with care."),
                ]
            )
    text = extract("manual.pdf", pdf_bytes(pages)).text
    assert "Chapter 2: Utilities" not in text and "Chapter 3: Reference" not in text
    lines = text.splitlines()
    assert not [line for line in lines if line.strip().isdigit()]  # no page number of its own
    assert "# 2 Utilities" in lines and "2.1 Overview of Utilities." in lines  # a section number is kept
    assert "3.4 Details of reference, part 3, read with care." in lines


def test_ocr_lines_of_one_sentence_stay_one_paragraph():
    from collections_app.text.pdf import ocr_lines

    read = ocr_lines(
        "PRINTER NOTICE\n\nThe old printer on level 3\n\nis retired on 30 June.\n\nUse the new one.\n"
    )
    assert [(line.text, line.gap_before) for line in read] == [
        ("PRINTER NOTICE", False),
        ("The old printer on level 3", True),
        ("is retired on 30 June.", False),  # the sentence goes on: no paragraph break
        ("Use the new one.", True),
    ]


def test_a_gap_between_paragraphs_becomes_a_blank_line():
    long = "Everyone earns twenty five days of leave a year, accrued monthly and paid at the usual rate."
    text = extract("a.pdf", pdf_bytes([[("p", long), ("p", "Unused days lapse in March.")]])).text
    first, second = text.split("\n\n")
    assert "\n" in first and first.replace("\n", " ") == long and second == "Unused days lapse in March."


def test_extraction_says_where_each_page_starts():
    result = extract("a.pdf", pdf_bytes([[("p", "First page text.")], [], [("p", "Third page text.")]]))
    assert result.pages == (PageStart(0, 1), PageStart(len("First page text.") + 2, 3))
    third = result.text.index("Third")
    assert page_range(result.pages, third, third + 5) == (3, 3)
    assert page_range(result.pages, 0, len(result.text)) == (1, 3)


def test_a_paragraph_cut_from_joined_blocks_finds_its_pages():
    text, pages = join_blocks([Block("one  \r\n", 1), Block("", 2), Block("two", 3), Block("more", 3)])
    assert text == "one\n\ntwo\n\nmore" and pages == (PageStart(0, 1), PageStart(5, 3))
    assert page_range(pages, 0, 3) == (1, 1) and page_range(pages, 2, 8) == (1, 3)
    assert page_range((), 0, 3) == (None, None)
    assert join_blocks([Block("no pages")]) == ("no pages", ())


@pytest.mark.parametrize("name", ["a.md", "a.txt", "a.html"])
def test_formats_without_pages_carry_none(name):
    assert extract(name, b"words").pages == ()
