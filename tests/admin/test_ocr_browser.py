"""OCR and pages in the admin, clicked in a real browser: a librarian sees how many pages a machine read
off pictures (on the build and on the document) and which page each paragraph is on."""

import pytest

from collections_app.samples import pdf_bytes, scanned_pdf_bytes

from .browser import log_in
from .conftest import make_built

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PAGES = [
    [("h", "Parking"), ("p", "Staff park in the north car park; visitors use the spaces by reception.")],
    [("h", "Canteen"), ("p", "The canteen serves lunch from noon until two every weekday.")],
]


def test_a_librarian_sees_the_pages_read_by_ocr_and_the_page_of_a_paragraph(
    page, admin_user, agent, knowledge_folder
):
    files = {"mixed.pdf": scanned_pdf_bytes(pdf_bytes(PAGES), pages=[1])}
    collection = make_built(agent, knowledge_folder, "office", files, method="structure")
    log_in(page)
    page.click("#content-main a:text-is('Collections')")
    page.click(f"#result_list a:text-is('{collection.name}')")
    history = page.inner_text("tr[data-build]")
    assert "1 read, 0 reused, 0 refused, 1 page by OCR" in history

    page.goto("/admin/")
    page.click("#content-main a:text-is('Documents')")
    page.click("#result_list a:has-text('mixed.pdf')")
    assert "1 page" in page.inner_text(".field-ocr_shown")
    page.click(".field-paragraphs_link a")
    page.click("#result_list a:text-is('mixed.pdf#1')")  # the Canteen section, on the text page
    assert page.inner_text(".field-pages_shown .readonly").strip() == "page 2"
    page.go_back()
    page.click("#result_list a:text-is('mixed.pdf#0')")  # the scanned page
    assert page.inner_text(".field-pages_shown .readonly").strip() == "page 1"


def test_the_playground_shows_the_page_of_each_result(page, admin_user, agent, knowledge_folder):
    files = {
        "mixed.pdf": scanned_pdf_bytes(pdf_bytes(PAGES), pages=[1]),
        "notes.md": "# Notes\n\nNo pages here.",
    }
    collection = make_built(agent, knowledge_folder, "office", files, method="structure")
    log_in(page)
    page.goto("/admin/collections_app/collection/")
    page.click("text=Search playground")
    page.select_option("#id_collection", str(collection.pk))
    page.fill("#id_question", "When does the canteen serve lunch?")
    page.fill("#id_min_score", "0")
    page.fill("#id_around", "0")
    page.click("#playground-submit")
    page.wait_for_selector("#playground-result")
    first = page.locator(".rs-result >> nth=0")
    assert first.get_attribute("data-chunk") == "mixed.pdf#1"
    assert first.locator("[data-role=pages]").inner_text() == "p. 2"
