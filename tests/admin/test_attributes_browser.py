"""A document's attributes (from its `<file>.meta.json`) on its admin page, in a real browser."""

import json

import pytest

from .browser import log_in
from .conftest import HANDBOOK, make_built

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_documents_page_shows_the_attributes_its_sidecar_gave_it(page, admin_user, agent, knowledge_folder):
    files = {**HANDBOOK, "leave.md.meta.json": json.dumps({"team": "hr", "year": 2024})}
    make_built(agent, knowledge_folder, "handbook", files)
    log_in(page)
    page.goto("/admin/collections_app/document/")
    assert "meta.json" not in page.inner_text("#result_list")  # a sidecar is not a document
    page.click("#result_list >> text=leave.md")
    page.wait_for_selector("[data-role=attributes]")
    assert page.inner_text("[data-role=attributes]").split() == ["team", "hr", "year", "2024"]
    page.go_back()
    page.click("#result_list >> text=travel.md")
    page.wait_for_selector(".field-attributes_shown")
    assert "none: write them in travel.md.meta.json" in page.inner_text(".field-attributes_shown")
