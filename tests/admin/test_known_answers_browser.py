"""Known answers in a real browser (issue 17): a librarian adds a set, reads the floor off it, and sees a
rebuild that loses an answer named on the collection page. Playwright driving Debian's chromium; run with `-m
browser`."""

import json

import pytest

from collections_app.models import KnownAnswersReport

from .conftest import HANDBOOK
from .test_admin_browser import log_in, messages_text, page  # noqa: F401  (page is a fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LINES = (
    "how much annual leave carries over | capped at five days\n"
    "what is mileage reimbursed at per kilometre | 0.42 per kilometre\n"
    "must laptops use disk encryption | full-disk encryption\n"
    "! what is the recipe for sourdough bread\n"
)


def test_a_librarian_adds_known_answers_measures_the_floor_and_sees_a_regression(
    page,  # noqa: F811
    admin_user,
    handbook,
    knowledge_folder,
    tmp_path,
):
    log_in(page)
    page.goto(f"/admin/collections_app/collection/{handbook.pk}/change/")
    assert "No known answers yet" in page.inner_text("#known-answers")
    page.click("#known-answers-edit")
    page.fill("#id_lines", LINES)
    # django-q runs synchronously in tests: the live build is measured on save
    page.click("#known-answers-save")
    page.wait_for_selector("ul.messagelist")
    assert "Saved 3 known answers and 1 controls. The live build is being measured" in messages_text(page)
    live = KnownAnswersReport.objects.get(build=handbook.runs.get())
    assert page.inner_text("#known-answers [data-role=found-at-5]") == f"{live.found_at_5} of 3"
    assert page.inner_text("#known-answers [data-role=floor-source]") == "default"

    # Read the floor off them: the collection's own form, then a rebuild that loses the mileage answer.
    page.check("#id_floor_measured")
    page.click("input[name=_continue]")
    page.wait_for_selector("ul.messagelist")
    assert page.inner_text("#known-answers [data-role=floor-source]") == "measured"
    assert page.inner_text("#known-answers [data-role=floor]") == str(live.measured_floor)
    knowledge_folder("handbook", {"travel.md": "# Travel\n\nTrains are booked in standard class.\n"})
    page.click("#rebuild-button")
    page.wait_for_selector("ul.messagelist")
    warnings = page.inner_text("#known-answers [data-role=known-answers-warnings]")
    assert "1 of 3 known answers no longer found: “what is mileage reimbursed at per kilometre”" in warnings
    assert "no longer found" in page.inner_text("table.rs-history")
    assert page.locator("#known-answers-sparkline circle").count() == 2

    # The measure page starts from the stored set.
    page.click("#known-answers-measure")
    assert "how much annual leave carries over | capped at five days" in page.input_value("#id_questions")

    # A JSON Lines upload replaces the set.
    upload = tmp_path / "known.jsonl"
    upload.write_text(
        "\n".join(
            json.dumps(item)
            for item in [
                {"question": "are trains booked in standard class", "answer": "standard class"},
                {"question": "what is the recipe for sourdough bread", "control": True},
            ]
        )
    )
    page.goto(f"/admin/collections_app/collection/{handbook.pk}/known-answers/")
    page.set_input_files("#id_upload", str(upload))
    page.click("#known-answers-save")
    page.wait_for_selector("ul.messagelist")
    assert "Saved 1 known answers and 1 controls" in messages_text(page)
    assert page.inner_text("#known-answers [data-role=found-at-5]") == "1 of 1"
    assert HANDBOOK  # the fixture's documents, less the mileage paragraph
