"""Extraction from bytes: one test per behaviour, documents made in the test."""

import io
from pathlib import Path

import docx
import pytest
from pypdf import PdfReader, PdfWriter

from collections_app.samples import SAFETY_PAGES, pdf_bytes
from collections_app.text.extract import (
    REFUSAL_REASONS,
    SUPPORTED_SUFFIXES,
    Extracted,
    Unreadable,
    extract,
    summarize_opening,
)

SAMPLES = Path(__file__).resolve().parents[2] / "collections_app" / "sample_docs"


def reason_of(name: str, data: bytes) -> str:
    with pytest.raises(Unreadable) as caught:
        extract(name, data)
    return caught.value.reason


def category_of(name: str, data: bytes) -> str:
    with pytest.raises(Unreadable) as caught:
        extract(name, data)
    return caught.value.category


def docx_file(build) -> bytes:
    document = docx.Document()
    build(document)
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


def encrypted(pdf: bytes, **how) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    writer.encrypt(**how)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


# --- choosing the type ---------------------------------------------------------------------------


def test_unsupported_suffix_is_refused_naming_the_suffix():
    assert reason_of("notes.xyz", b"hello") == "unsupported type .xyz"


def test_a_name_without_suffix_is_read_as_text_when_it_is_text():
    assert extract("README", b"Install with pip.\n").text == "Install with pip."
    assert extract("docs/CHANGELOG", b"\xef\xbb\xbf## 1.2\n\n- fixed").text == "## 1.2\n\n- fixed"


def test_a_name_without_suffix_that_is_not_text_is_refused_as_unsupported():
    assert category_of("LICENSE", b"caf\xe9 \xff\xfe") == "unsupported type"
    assert category_of("a.out", b"\x7fELF\x02\x01\x01\x00\x00") == "unsupported type"  # ".out" is a suffix
    assert category_of("blob", b"\x7fELF\x02\x01\x01\x00\x00binary") == "unsupported type"


def test_suffix_is_compared_case_insensitively():
    assert extract("docs/NOTES.MD", b"# Title\n\nBody").text == "# Title\n\nBody"


def test_every_supported_suffix_is_accepted_by_name():
    for suffix in (".md", ".markdown", ".txt", ".text"):
        assert extract("a" + suffix, b"words").text == "words"
    assert extract("a.htm", b"<p>words</p>").text == "words"
    assert set(SUPPORTED_SUFFIXES) == {
        ".pdf",
        ".docx",
        ".md",
        ".markdown",
        ".txt",
        ".text",
        ".html",
        ".htm",
        ".pptx",
        ".xlsx",
        ".csv",
        ".epub",
        ".odt",
        ".odp",
        ".png",
        ".jpg",
        ".jpeg",
        ".tif",
        ".tiff",
    }


def test_reason_never_carries_the_documents_name_or_folder():
    for name, data in [
        ("hr-share/secret-folder/report.pdf", b"not a pdf"),
        ("hr-share/secret-folder/report.docx", b"not a zip"),
        ("hr-share/secret-folder/report.txt", b"caf\xe9"),
        ("hr-share/secret-folder/report.exe", b"MZ"),
    ]:
        reason = reason_of(name, data)
        assert "secret" not in reason and "hr-share" not in reason and "report" not in reason


# --- Markdown and plain text ---------------------------------------------------------------------


def test_text_drops_the_byte_order_mark_and_normalises_line_ends():
    result = extract("a.txt", b"\xef\xbb\xbfline one\r\nline two\rline three\n")
    assert result == Extracted(text="line one\nline two\nline three", warnings=[])


def test_markdown_keeps_its_headings_as_they_are():
    assert extract("a.md", b"# Leave\n\nCarry-over is capped.\n").text == "# Leave\n\nCarry-over is capped."


def test_text_that_is_not_utf8_is_refused_rather_than_guessed():
    assert reason_of("a.txt", "café".encode("latin-1")) == "not UTF-8 text"
    assert reason_of("a.md", "naïve".encode("utf-16")) == "not UTF-8 text"


def test_empty_and_whitespace_only_documents_are_refused_as_no_text():
    assert reason_of("a.txt", b"") == "no text"
    assert reason_of("a.md", b" \n\t\r\n ") == "no text"


def test_runs_of_blank_lines_collapse_to_one():
    assert extract("a.txt", b"one\n\n\n\n\ntwo   \n").text == "one\n\ntwo"


# --- PDF -----------------------------------------------------------------------------------------


def test_pdf_text_is_read_page_by_page_with_a_blank_line_between_pages():
    result = extract("a.pdf", pdf_bytes([[("p", "First page text.")], [("p", "Second page text.")]]))
    assert result.text == "First page text.\n\nSecond page text."
    assert result.warnings == []


def test_pdf_page_without_a_text_layer_is_a_warning_not_a_refusal():
    result = extract("a.pdf", pdf_bytes([[("p", "Readable.")], [], [("p", "Also readable.")]]))
    assert result.text == "Readable.\n\nAlso readable."
    assert result.warnings == ["page 2 has no text layer"]


def test_pdf_with_no_text_on_any_page_is_refused_as_no_text():
    assert reason_of("scan.pdf", pdf_bytes([[], []])) == "no text"


def test_pdf_needing_a_password_is_refused_as_encrypted():
    locked = encrypted(pdf_bytes(SAFETY_PAGES), user_password="secret", algorithm="AES-128")
    assert reason_of("a.pdf", locked) == "encrypted"


def test_pdf_encrypted_with_an_empty_user_password_is_read():
    opened = encrypted(pdf_bytes(SAFETY_PAGES), user_password="", owner_password="owner", algorithm="RC4-128")
    assert "Safety glasses are mandatory" in extract("a.pdf", opened).text


def test_corrupt_pdf_is_refused_as_not_readable():
    whole = pdf_bytes(SAFETY_PAGES)
    for data in (b"", b"hello", b"%PDF-1.4\ngarbage", whole[: len(whole) // 2]):
        assert reason_of("a.pdf", data) == "not a readable PDF"


def test_pdf_text_keeps_characters_outside_ascii():
    assert (
        extract("a.pdf", pdf_bytes([[("p", "Café costs 5 € (approx.)")]])).text == "Café costs 5 € (approx.)"
    )


# --- DOCX ----------------------------------------------------------------------------------------


def test_docx_headings_and_title_become_markdown_headings():
    def build(document):
        document.add_heading("Benefits", level=0)
        document.add_paragraph("Intro.")
        document.add_heading("Pension", level=1)
        document.add_heading("Matching", level=2)
        document.add_heading("Deep", level=9)
        document.add_paragraph("Body.")

    text = extract("a.docx", docx_file(build)).text
    assert text == "# Benefits\n\nIntro.\n\n# Pension\n\n## Matching\n\n###### Deep\n\nBody."


def test_docx_table_rows_appear_where_the_table_stands():
    def build(document):
        document.add_paragraph("Before the table.")
        table = document.add_table(rows=2, cols=2)
        for row, values in zip(table.rows, [("Benefit", "Amount"), ("Gym", "30 euros")], strict=True):
            for cell, value in zip(row.cells, values, strict=True):
                cell.text = value
        document.add_paragraph("After the table.")

    text = extract("a.docx", docx_file(build)).text
    assert text == (
        "Before the table.\n\n| Benefit | Amount |\n| --- | --- |\n| Gym | 30 euros |\n\nAfter the table."
    )


def test_docx_merged_cell_stands_over_each_column_it_spans():
    def build(document):
        table = document.add_table(rows=2, cols=3)
        table.cell(0, 0).merge(table.cell(0, 1)).text = "Wide"
        table.cell(0, 2).text = "Right"
        for index, value in enumerate(("a", "b", "c")):
            table.cell(1, index).text = value

    expected = "| Wide | Wide | Right |\n| --- | --- | --- |\n| a | b | c |"
    assert extract("a.docx", docx_file(build)).text == expected


def test_docx_empty_paragraphs_are_skipped():
    def build(document):
        document.add_paragraph("One.")
        document.add_paragraph("")
        document.add_paragraph("   ")
        document.add_paragraph("Two.")

    assert extract("a.docx", docx_file(build)).text == "One.\n\nTwo."


def test_corrupt_docx_is_refused():
    for data in (b"", b"plain text", b"PK\x03\x04broken zip"):
        assert reason_of("a.docx", data) == "not a readable Word document"


def test_docx_with_no_text_is_refused_as_no_text():
    assert reason_of("a.docx", docx_file(lambda document: None)) == "no text"


# --- HTML ----------------------------------------------------------------------------------------


def test_html_headings_become_markdown_lines_and_blocks_become_paragraphs():
    page = b"<h1>Travel</h1><p>Book early.</p><div><h2>Mileage <em>rules</em></h2><p>0.42 per km.</p></div>"
    assert extract("a.html", page).text == "# Travel\n\nBook early.\n\n## Mileage rules\n\n0.42 per km."


def test_html_script_style_and_title_are_not_text():
    page = b"""<html><head><title>Tab title</title><style>p{color:red}</style>
    <script>var secret = "x";</script></head><body><p>Visible.</p>
    <template><p>Hidden template</p></template><noscript>Enable JS</noscript></body></html>"""
    assert extract("a.html", page).text == "Visible."


def test_html_without_a_closing_head_still_yields_its_body():
    assert extract("a.html", b"<html><head><title>T</title><body><p>Body text.</p>").text == "Body text."


def test_html_entities_are_unescaped_and_whitespace_collapsed():
    page = b"<p>Hotels &amp; meals:\n   150&nbsp;&euro; &lt;max&gt; &#169;</p>"
    assert extract("a.html", page).text == "Hotels & meals: 150 € <max> ©"


def test_html_list_items_and_line_breaks_are_lines_and_tables_are_markdown_tables():
    page = (
        b"<ul><li>One</li><li>Two</li></ul><p>a<br>b<br/>c</p>"
        b"<table><tr><th>Country</th><th>Rate</th></tr><tr><td>France</td><td>32</td></tr></table>"
    )
    assert (
        extract("a.html", page).text
        == "One\nTwo\n\na\nb\nc\n\n| Country | Rate |\n| --- | --- |\n| France | 32 |"
    )


def test_html_preformatted_text_keeps_its_lines():
    assert extract("a.html", b"<pre>line 1\n  indented</pre>").text == "line 1\n  indented"


def test_html_meta_charset_naming_another_codec_is_honoured():
    page = '<meta charset="windows-1252"><p>Caf\u00e9 \u2013 “quoted”</p>'.encode("cp1252")
    assert extract("a.html", page).text == "Café – “quoted”"
    legacy = (
        b'<meta http-equiv="Content-Type" content="text/html; charset=iso-8859-1"><p>\x93ok\x94 caf\xe9</p>'
    )
    # Like a browser, a Latin-1 label is read as windows-1252, where 0x93/0x94 are curly quotes.
    assert extract("a.htm", legacy).text == "“ok” café"


def test_html_without_a_charset_must_be_utf8():
    assert extract("a.html", "<p>Zürich</p>".encode()).text == "Zürich"
    assert reason_of("a.html", "<p>Zürich</p>".encode("latin-1")) == "not UTF-8 text"


def test_html_with_an_unknown_charset_label_is_read_as_utf8():
    assert extract("a.html", '<meta charset="no-such-codec"><p>Zürich</p>'.encode()).text == "Zürich"


def test_html_with_only_markup_is_refused_as_no_text():
    assert reason_of("a.html", b"<html><head><script>x()</script></head><body> </body></html>") == "no text"


# --- the sample documents ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fact"),
    [
        ("handbook.md", "Carry-over is capped at five days"),
        ("onboarding.txt", "Your badge is collected from\nreception on the first morning"),
        ("travel-policy.html", "Mileage is reimbursed at 0.42 per kilometre"),
        ("benefits.docx", "A gym subsidy of 30 euros per month"),
        ("safety.pdf", "Safety glasses are mandatory at all times in the workshop"),
    ],
)
def test_each_sample_document_extracts_with_its_own_fact(name, fact):
    result = extract(name, (SAMPLES / name).read_bytes())
    assert fact in result.text
    assert result.warnings == []


def test_sample_documents_are_small_and_the_pdf_matches_its_generator():
    assert sum(path.stat().st_size for path in SAMPLES.iterdir() if path.is_file()) < 100_000
    assert (SAMPLES / "safety.pdf").read_bytes() == pdf_bytes(SAFETY_PAGES)


def test_sample_docx_keeps_its_headings_and_table():
    text = extract("benefits.docx", (SAMPLES / "benefits.docx").read_bytes()).text
    assert "\n## Gym subsidy\n" in text
    assert "Gym subsidy | 30 euros per month | employee" in text


# --- summarize_opening ---------------------------------------------------------------------------


def test_summary_skips_headings_and_keeps_a_short_opening_whole():
    assert (
        summarize_opening("# Title\n\nShort   opening\nline.\n\n## Next\n\nMore.")
        == "Short opening line. More."
    )


def test_summary_of_a_long_opening_is_cut_at_a_word_boundary_with_an_ellipsis():
    text = "# Handbook\n\n" + " ".join(f"word{i}" for i in range(200))
    summary = summarize_opening(text, limit=50)
    assert summary.endswith("…")
    assert len(summary) <= 51
    assert summary[:-1].split() == [f"word{i}" for i in range(len(summary[:-1].split()))]


def test_summary_of_one_giant_word_is_cut_at_the_limit():
    assert summarize_opening("x" * 500, limit=10) == "x" * 10 + "…"


def test_summary_of_headings_only_uses_their_text():
    assert summarize_opening("# Only\n## Headings") == "Only Headings"


# --- the category a librarian is shown -----------------------------------------------------------


def test_the_refusal_vocabulary_is_fixed_and_says_what_a_librarian_can_act_on():
    assert REFUSAL_REASONS == (
        "corrupt",
        "encrypted",
        "no text layer — scanned?",
        "unsupported type",
        "too large",
        "empty",
        "timed out",
        "bad name",  # the per-document limits (collections_app.text.bounded, services.sources)
        "needs OCR (not installed)",  # a scan or an image where Tesseract (or a language) is missing
    )


@pytest.mark.parametrize(
    ("name", "data", "category"),
    [
        ("notes.xyz", b"hello", "unsupported type"),
        ("README", b"\x89PNG\r\n\x1a\n\x00\x00", "unsupported type"),
        ("latin.txt", "café".encode("latin-1"), "unsupported type"),
        ("a.txt", b" \n\t ", "empty"),
        ("a.pdf", b"%PDF-1.4\ngarbage", "corrupt"),
        ("a.docx", b"PK\x03\x04 not a zip", "corrupt"),
        ("scan.pdf", pdf_bytes([[], []]), "no text layer — scanned?"),
        (
            "a.pdf",
            encrypted(pdf_bytes(SAFETY_PAGES), user_password="secret", algorithm="AES-128"),
            "encrypted",
        ),
        ("a.html", b"<html><body> </body></html>", "empty"),
    ],
)
def test_each_refusal_carries_a_category_from_the_vocabulary(name, data, category):
    assert category_of(name, data) == category


def test_a_category_outside_the_vocabulary_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown refusal category"):
        Unreadable("whatever", category="broken")


# --- page furniture and tables in HTML -----------------------------------------------------------


def test_html_navigation_and_the_pages_banner_and_footer_are_dropped():
    page = (
        b"<body><header><a href='/'>Acme</a> Home Products</header><nav><a>Docs</a><a>Blog</a></nav>"
        b"<div role='navigation'>Skip to content</div><main><article><header><h1>Returns</h1>"
        b"<p>By the support team</p></header><p>Returns are free for 30 days.</p><footer>Posted in policy"
        b"</footer></article></main><footer>Copyright Acme</footer>"
        b"<div role='contentinfo'>Imprint</div></body>"
    )
    assert extract("a.html", page).text == (
        "# Returns\n\nBy the support team\n\nReturns are free for 30 days.\n\nPosted in policy"
    )


def test_html_table_without_header_cells_takes_its_first_row_as_header_and_nested_tables_are_one_cell():
    page = (
        b"<table><tr><td>Plan</td><td>Price</td></tr><tr><td>Basic<table><tr><td>monthly</td></tr>"
        b"</table></td><td>10</td></tr></table><p>After</p>"
    )
    assert extract("a.html", page).text == "| Plan | Price |\n| --- | --- |\n| Basic monthly | 10 |\n\nAfter"


def test_a_50_mb_page_is_read_only_as_far_as_the_text_limit():
    from collections_app.text.reading import MAX_TEXT_CHARS

    page = b"<p>" + b"word " * (10 * 1024 * 1024) + b"</p><p>the end</p>"
    extracted = extract("big.html", page)
    assert MAX_TEXT_CHARS - 10 <= len(extracted.text) <= MAX_TEXT_CHARS
    assert extracted.notes == [f"only its first {MAX_TEXT_CHARS:,} characters were read"]
    assert "the end" not in extracted.text


def test_the_pages_banner_keeps_its_headings_and_drops_the_rest():
    page = (
        b"<body><header><a href='/'>Acme</a><h1>Returns policy</h1><ul><li>Shop</li><li>Help</li></ul>"
        b"</header><p>Returns are free.</p></body>"
    )
    assert extract("a.html", page).text == "# Returns policy\n\nReturns are free."
