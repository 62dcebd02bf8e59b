"""Scans read by OCR (Tesseract), within bounds; refused with a reason where Tesseract is missing."""

import io
import time

import pytest

from collections_app.metrics import character_error_rate
from collections_app.samples import pdf_bytes, scanned_pdf_bytes
from collections_app.text.bounded import BoundedExtractor, Limits
from collections_app.text.extract import NEEDS_OCR, TOO_LARGE, Unreadable, extract
from collections_app.text.ocr import OcrOptions

PAGES = [
    [("h", "Leave"), ("p", "Every employee earns twenty five days of paid leave in a calendar year.")],
    [("h", "Expenses"), ("p", "A receipt is required for any single item above twenty five euros.")],
    [("h", "Security"), ("p", "Passwords are at least fourteen characters long and never written down.")],
]
OCR = OcrOptions(languages="eng", max_pages=10, page_seconds=60, max_pixels=12_000_000, dpi=300)


def words(text: str) -> str:
    """The text a reader sees: heading marks (which OCR does not make) left out."""
    return " ".join(line.lstrip("# ") for line in text.splitlines() if line.strip())


@pytest.fixture(scope="module")
def born_digital():
    return pdf_bytes(PAGES)


@pytest.fixture(scope="module")
def scan(born_digital):
    return scanned_pdf_bytes(born_digital)


def test_character_error_rate_is_edit_distance_over_the_truth():
    assert character_error_rate("kitten", "sitting") == pytest.approx(3 / 7)
    assert character_error_rate("a  b\nc", "a b c") == 0 and character_error_rate("", "") == 0


def test_a_scanned_pdf_is_read_by_ocr_page_by_page(scan, born_digital):
    result = extract("scan.pdf", scan, ocr=OCR)
    truth = extract("a.pdf", born_digital).text
    assert result.ocr_pages == 3 and [mark.page for mark in result.pages] == [1, 2, 3]
    assert character_error_rate(words(result.text), words(truth)) < 0.02
    second = result.text[result.pages[1].offset : result.pages[2].offset]
    assert "receipt is required" in second


def test_without_ocr_options_a_scan_has_no_text_layer(scan):
    with pytest.raises(Unreadable) as refused:
        extract("scan.pdf", scan, ocr=None)
    assert refused.value.category == "no text layer — scanned?"


def test_a_mixed_pdf_keeps_its_text_pages_and_reads_only_the_scanned_one(born_digital):
    mixed = scanned_pdf_bytes(born_digital, pages=[2])
    result = extract("mixed.pdf", mixed, ocr=OCR)
    digital = extract("a.pdf", born_digital).text
    assert result.ocr_pages == 1
    first = result.text[: result.pages[1].offset].strip()
    assert first == digital[: digital.index("# Expenses")].strip()  # the text layer, not OCR'd again
    assert "receipt is required" in result.text and "# Security" in result.text


def test_an_image_file_is_read_by_ocr(born_digital):
    import pypdfium2

    page = pypdfium2.PdfDocument(born_digital)[0]
    picture = page.render(scale=300 / 72, grayscale=True).to_pil()
    for suffix, kind in ((".png", "PNG"), (".jpg", "JPEG"), (".tiff", "TIFF")):
        buffer = io.BytesIO()
        picture.save(buffer, format=kind, dpi=(300, 300))
        result = extract("photo" + suffix, buffer.getvalue(), ocr=OCR)
        assert "twenty five days of paid leave" in " ".join(result.text.split()), suffix
        assert result.ocr_pages == 1 and result.pages[0].page == 1


def test_without_tesseract_a_scan_or_image_is_refused_as_needing_ocr_and_a_mixed_pdf_keeps_its_text(
    scan, born_digital, monkeypatch, tmp_path
):
    monkeypatch.setenv("PATH", str(tmp_path))  # no tesseract on this PATH
    for name, data in (("scan.pdf", scan), ("photo.png", b"\x89PNG\r\n\x1a\n")):
        with pytest.raises(Unreadable) as refused:
            extract(name, data, ocr=OCR)
        assert refused.value.category == NEEDS_OCR == "needs OCR (not installed)"
    result = extract("mixed.pdf", scanned_pdf_bytes(born_digital, pages=[2]), ocr=OCR)
    assert "# Leave" in result.text and result.ocr_pages == 0
    assert result.warnings == ["page 2 has no text layer (needs OCR, not installed)"]


def test_a_language_that_is_not_installed_is_refused_by_name(scan):
    with pytest.raises(Unreadable) as refused:
        extract("scan.pdf", scan, ocr=OcrOptions(languages="eng+xyz"))
    assert refused.value.category == NEEDS_OCR and "xyz" in refused.value.reason


def test_pages_over_the_ocr_limit_are_left_out_with_a_warning(scan):
    result = extract("scan.pdf", scan, ocr=OcrOptions(max_pages=1))
    assert result.ocr_pages == 1 and "twenty five days" in result.text and "receipt" not in result.text
    assert result.warnings == [
        f"page {n} was not read by OCR: over the limit of 1 OCR pages a document" for n in (2, 3)
    ]


def test_a_page_over_its_time_limit_is_left_out_with_a_warning(scan):
    with pytest.raises(Unreadable):  # no page read at all: nothing to index
        extract("scan.pdf", scan, ocr=OcrOptions(page_seconds=0.001))


def test_pixels_are_bounded_a_page_is_rendered_small_and_a_huge_image_is_refused_undecoded(born_digital):
    from PIL import Image

    small = extract(
        "scan.pdf", scanned_pdf_bytes(born_digital, pages=[1]), ocr=OcrOptions(max_pixels=2_000_000)
    )
    assert "twenty five days" in small.text  # A4 at about 140 dpi still reads
    huge = io.BytesIO()
    Image.new("L", (20_000, 20_000), 255).save(huge, format="PNG")  # a few hundred KB, 400 Mpixels
    started = time.monotonic()
    with pytest.raises(Unreadable) as refused:
        extract("huge.png", huge.getvalue(), ocr=OcrOptions(max_pixels=1_000_000))
    assert refused.value.category == TOO_LARGE and time.monotonic() - started < 10


def test_ocr_runs_in_the_bounded_child_under_its_memory_cap_and_each_page_extends_its_deadline(scan):
    # Three OCR'd pages take longer than the document's 4 s: each page OCR starts adds its own limit.
    bounded = BoundedExtractor(Limits(seconds=4.0, memory_bytes=768 * 1024 * 1024, ocr=OCR))
    try:
        result = bounded.extract("scan.pdf", scan)
    finally:
        bounded.close()
    assert result.ocr_pages == 3 and [mark.page for mark in result.pages] == [1, 2, 3]
    assert "fourteen characters" in result.text
