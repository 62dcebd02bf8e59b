"""A librarian's tasks in a real browser (issue 11): every step clicked on the real pages in chromium.

Run with `pytest -m browser`; skipped with the reason when /usr/bin/chromium is missing.
"""

import pytest

from collections_app.models import ApiKey, BuildRun, Collection, Document, Label, MeasureRun, Paragraph
from collections_app.services.agents import create_reader

from .browser import horizontal_overflow, log_in, messages_text, run_action, screenshot
from .conftest import HANDBOOK, make_built

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def many_documents(count: int = 40) -> dict[str, str]:
    """`count` documents of three paragraphs: two about the archive, one about the canteen."""
    return {
        f"note-{n:02}.md": f"# Note {n}\n\nThe archive keeps box {n} on shelf {n}.\n\n"
        f"The archive opens at nine for box {n}.\n\nThe canteen serves soup number {n}.\n"
        for n in range(count)
    }


@pytest.fixture
def library(agent, knowledge_folder):
    # fixed 40: one paragraph per block, 120 paragraphs over three pages of 50.
    return make_built(agent, knowledge_folder, "library", many_documents(), size=40)


def select_all_across(page, expected: int):
    page.check("#action-toggle")
    page.click(".actions .question a")  # "Select all N paragraphs"
    page.wait_for_selector(".actions .all", state="visible")
    assert f"All {expected} selected" in page.inner_text(".actions .all")


# --- 1. Bulk labelling applies, always ----------------------------------------------------------------


def test_select_all_across_pages_then_add_labels_labels_every_one(page, admin_user, library):
    total = Paragraph.objects.filter(collection=library).count()
    assert total > 100  # three pages of 50
    log_in(page)
    page.goto(f"/admin/collections_app/paragraph/?collection__id__exact={library.pk}")
    select_all_across(page, total)
    run_action(page, "add_labels_action")
    page.wait_for_selector("#label-form")
    assert f"{total} paragraphs" in page.inner_text("#content-main")
    page.fill("#id_new_labels", "archive")
    page.click("#label-apply")
    page.wait_for_selector("ul.messagelist")
    assert f"Added archive to {total} paragraphs" in messages_text(page)
    assert Paragraph.objects.filter(labels__name="archive").count() == total


def test_select_all_of_a_filtered_list_labels_the_filtered_rows_only(page, admin_user, library):
    archive = Paragraph.objects.filter(collection=library, text__icontains="archive")
    wanted = set(archive.values_list("pk", flat=True))
    assert len(wanted) == 80
    log_in(page)
    page.goto(f"/admin/collections_app/paragraph/?collection__id__exact={library.pk}&q=archive")
    select_all_across(page, 80)
    run_action(page, "add_labels_action")
    page.wait_for_selector("#label-form")
    page.fill("#id_new_labels", "stacks")
    page.click("#label-apply")
    page.wait_for_selector("ul.messagelist")
    assert set(Paragraph.objects.filter(labels__name="stacks").values_list("pk", flat=True)) == wanted
    # Remove labels… across the same filtered pages takes them all off again.
    select_all_across(page, 80)
    run_action(page, "remove_labels_action")
    page.wait_for_selector("#label-form")
    page.check('input[name="labels"] >> nth=0')
    page.click("#label-apply")
    page.wait_for_selector("ul.messagelist")
    assert not Paragraph.objects.filter(labels__name="stacks").exists()


# --- 2. Labels that mean something -----------------------------------------------------------------


def test_labelling_in_an_open_collection_says_so_and_switches_per_reader_on(page, admin_user, handbook):
    assert not handbook.per_reader
    badges = Paragraph.objects.filter(collection=handbook, text__icontains="badges").first()
    log_in(page)
    page.goto(f"/admin/collections_app/paragraph/?collection__id__exact={handbook.pk}")
    page.check(f'input[name="_selected_action"][value="{badges.pk}"]')
    run_action(page, "add_labels_action")
    notice = page.wait_for_selector("[data-role=labels-ignored]")
    assert "handbook is open to every reader; labels take effect when Per reader is on" in notice.inner_text()
    page.click("[data-role=labels-ignored] button.rs-switch")
    page.wait_for_selector("ul.messagelist")
    assert "Per reader is on for handbook" in messages_text(page)
    handbook.refresh_from_db()
    assert handbook.per_reader
    # The paragraph page no longer warns.
    page.goto(f"/admin/collections_app/paragraph/{badges.pk}/change/")
    assert page.locator("[data-role=labels-ignored]").count() == 0


def test_deleting_a_label_says_how_many_paragraphs_become_public(page, admin_user, handbook):
    hr = Label.objects.create(name="hr")
    other = Label.objects.create(name="staff")
    rows = list(Paragraph.objects.filter(collection=handbook).order_by("ordinal")[:3])
    for row in rows:
        row.labels.add(hr)
    rows[0].labels.add(other)  # keeps a label: not made public
    log_in(page)
    page.goto(f"/admin/collections_app/label/{hr.pk}/delete/")
    assert "makes 2 paragraphs readable by every reader" in page.inner_text("#becomes-public")
    page.click("#content input[type=submit]")
    page.wait_for_selector("ul.messagelist")
    assert not Label.objects.filter(name="hr").exists()


def test_the_add_form_states_the_defaults(page, admin_user, agent):
    log_in(page)
    page.goto("/admin/collections_app/collection/add/")
    assert page.locator("#id_method").input_value() == "structure"  # as the command and the model
    assert "Off by default: every reader sees every paragraph" in page.inner_text(".field-per_reader")
    assert "KNOWLEDGE_<NAME>_FOLDER" in page.inner_text(".field-name")


# --- 3. Enable / disable ------------------------------------------------------------------------------


def test_a_disabled_paragraph_is_struck_through_counted_and_never_searched(page, admin_user, handbook):
    capped = Paragraph.objects.get(collection=handbook, text__contains="capped at five")
    log_in(page)
    page.goto(f"/admin/collections_app/paragraph/?collection__id__exact={handbook.pk}")
    page.check(f'input[name="_selected_action"][value="{capped.pk}"]')
    run_action(page, "disable_action")
    page.wait_for_selector("ul.messagelist")
    assert "Disabled 1 paragraph;" in messages_text(page)
    assert page.locator(f"#result_list s.rs-disabled >> text={capped.chunk_id}").count() == 1
    page.goto(f"/admin/collections_app/collection/{handbook.pk}/change/")
    assert "(1 disabled)" in page.inner_text(".field-contents")
    stored = Paragraph.objects.filter(collection=handbook).count()
    assert f"{stored - 1:,} of {stored} paragraphs stored (1 disabled)" in page.inner_text(
        ".field-searchable"
    )
    # Through search, as an agent would get it: the playground no longer finds it.
    page.goto(f"/admin/collections_app/collection/playground/?collection={handbook.pk}")
    page.fill("#id_question", "how many days of annual leave carry over")
    page.fill("#id_min_score", "0")
    page.fill("#id_around", "0")
    page.fill("#id_most", "50")
    page.click("#playground-submit")
    page.wait_for_selector("#playground-result")
    assert "capped at five" not in page.inner_text("#playground-result")


def test_a_disabled_document_is_struck_through_and_enabled_again(page, admin_user, handbook):
    travel = handbook.documents.get(name="travel.md")
    log_in(page)
    page.goto(f"/admin/collections_app/document/?collection__id__exact={handbook.pk}")
    page.check(f'input[name="_selected_action"][value="{travel.pk}"]')
    run_action(page, "disable_action")
    page.wait_for_selector("ul.messagelist")
    assert page.locator("#result_list s.rs-disabled >> text=travel.md").count() == 1
    travel.refresh_from_db()
    assert not travel.enabled
    page.check(f'input[name="_selected_action"][value="{travel.pk}"]')
    run_action(page, "enable_action")
    page.wait_for_selector("ul.messagelist")
    travel.refresh_from_db()
    assert travel.enabled


# --- 4. Reasons and review ---------------------------------------------------------------------------


def test_a_refused_document_shows_its_reason_and_a_conflict_its_other_half(
    page, admin_user, agent, knowledge_folder
):
    from .conftest import CONFLICTING

    collection = make_built(
        agent,
        knowledge_folder,
        "mixed",
        # A third, plain document: a first build with every readable document in review is refused.
        {**CONFLICTING, "broken.pdf": b"%PDF-1.4 nothing", "canteen.md": "# Canteen\n\nIt opens at eight.\n"},
        outcome=BuildRun.SUCCEEDED_WITH_REVIEW,
    )
    broken = collection.documents.get(name="broken.pdf")
    log_in(page)
    page.goto(f"/admin/collections_app/document/{broken.pk}/change/")
    assert "corrupt" in page.inner_text("[data-role=refusal]")
    page.goto(f"/admin/collections_app/collection/{collection.pk}/change/")
    assert "broken.pdf (corrupt)" in page.inner_text(".field-current_build")
    older = collection.documents.get(name="policy-2023.md")
    page.goto(f"/admin/collections_app/document/{older.pk}/change/")
    side = page.locator('table.rs-side-by-side[data-other="policy-2024.md"]')
    assert "5 days" in side.inner_text() and "10 days" in side.inner_text()
    page.click("table.rs-side-by-side >> text=policy-2024.md")
    page.click("#approve-button")
    page.wait_for_selector("ul.messagelist")
    page.goto(f"/admin/collections_app/document/{older.pk}/change/")
    assert "conflicts with policy-2024.md, which is already searched" in page.inner_text(
        "[data-role=approve-warning]"
    )
    page.click("#approve-button")
    page.wait_for_selector("ul.messagelist")
    assert "agents will get both answers" in messages_text(page)
    assert "approved by admin" in page.inner_text(".field-approval")


# --- 7. The playground explains itself ------------------------------------------------------------------


def test_the_playground_links_marks_splits_and_compares_two_readers(
    page, admin_user, agent, knowledge_folder
):
    secret = make_built(agent, knowledge_folder, "secret", HANDBOOK, per_reader=True)
    hr = Label.objects.create(name="hr")
    for paragraph in Paragraph.objects.filter(collection=secret, document__name="leave.md"):
        paragraph.labels.add(hr)
    create_reader(external_id="alice", labels=["hr"])
    create_reader(external_id="bob", labels=["staff"])
    capped = Paragraph.objects.get(collection=secret, text__contains="capped at five")
    log_in(page)
    page.goto(f"/admin/collections_app/collection/playground/?collection={secret.pk}")
    page.fill("#id_question", "how many days of annual leave carry over")
    page.select_option("#id_reader", "alice")
    page.select_option("#id_compare_reader", "bob")
    page.fill("#id_around", "1")
    page.click("#playground-submit")
    alice, bob = (
        page.locator('fieldset.rs-answer[data-label="as alice"]'),
        page.locator('fieldset.rs-answer[data-label="as bob"]'),
    )
    first = alice.locator(".rs-result >> nth=0")
    assert first.locator("[data-role=chunk]").inner_text() == capped.chunk_id
    assert "capped at five" in first.locator("[data-role=hit]").inner_text()
    assert "lexical" in first.locator("[data-role=parts]").inner_text()
    assert alice.locator("[data-role=hidden]").inner_text() == "none"
    assert "hidden from this reader by labels" in bob.locator("[data-role=hidden]").inner_text()
    assert "capped at five" not in bob.inner_text()
    first.locator("[data-role=chunk]").click()
    page.wait_for_url(f"**/paragraph/{capped.pk}/change/")
    assert capped.chunk_id in page.inner_text(".field-citation")
    assert f"k = {capped.index} within its document" in page.inner_text(".field-position")


# --- 8. Measure as a job -------------------------------------------------------------------------------


def test_measure_from_the_collection_page_runs_as_a_job_and_is_listed(page, admin_user, handbook):
    log_in(page)
    page.goto(f"/admin/collections_app/collection/{handbook.pk}/change/")
    page.click("#measure-link")
    page.fill("#id_questions", "how many days of leave carry over | five days\n! sourdough recipe")
    page.click("#measure-submit")  # tasks run at once in tests; a real worker would poll
    page.wait_for_selector("#measure-report")
    run = MeasureRun.objects.get()
    assert run.status == MeasureRun.SUCCEEDED and run.requested_by == "admin"
    assert page.inner_text("#measure-progress [data-role=status]") == "succeeded"
    assert page.locator("#measure-summary tr.rs-variant").count() == len(run.report["variants"])
    assert page.locator(f'#measure-history tr[data-measure="{run.pk}"]').count() == 1
    page.goto(f"/admin/collections_app/collection/{handbook.pk}/change/")
    assert f"measure {run.pk}" in page.inner_text("#collection-measurements")


# --- 9. Uploads judged one file at a time ----------------------------------------------------------------


def test_an_empty_file_in_a_multi_file_upload_is_refused_alone(page, admin_user, handbook):
    log_in(page)
    page.goto(f"/admin/collections_app/document/upload/?collection={handbook.pk}")
    page.set_input_files(
        "#id_files",
        [
            {"name": "parking.md", "mimeType": "text/markdown", "buffer": b"# Parking\n\nLevel two.\n"},
            {"name": "empty.md", "mimeType": "text/markdown", "buffer": b""},
            {"name": "canteen.txt", "mimeType": "text/plain", "buffer": b"Soup at noon."},
        ],
    )
    page.click("#upload-submit")
    page.wait_for_selector("ul.messagelist")
    text = messages_text(page)
    assert "Uploaded to handbook: parking.md, canteen.txt" in text and '"empty.md": empty' in text
    assert sorted(handbook.documents.filter(source=Document.UPLOAD).values_list("name", flat=True)) == [
        "canteen.txt",
        "parking.md",
    ]


# --- 10. Deletes that work ---------------------------------------------------------------------------------


def test_a_superuser_deletes_a_document_and_the_last_one_is_refused(page, admin_user, handbook):
    log_in(page)
    for name in ("travel.md", "security.md"):
        document = handbook.documents.get(name=name)
        page.goto(f"/admin/collections_app/document/{document.pk}/delete/")
        assert "takes its" in page.inner_text("#delete-summary")
        page.click("#confirm-delete")
        page.wait_for_selector("ul.messagelist")
        assert f"Deleted {name} and its paragraphs" in messages_text(page)
    assert not Paragraph.objects.filter(document__name__in=["travel.md", "security.md"]).exists()
    assert "was deleted" in page.inner_text(".field-searchable")  # the collection needs a rebuild
    last = handbook.documents.get(name="leave.md")
    page.goto(f"/admin/collections_app/document/{last.pk}/delete/")
    page.click("#confirm-delete")
    page.wait_for_selector("ul.messagelist")
    assert "Not deleted: refusing to leave collection" in messages_text(page)
    assert Document.objects.filter(pk=last.pk).exists()


def test_a_superuser_deletes_a_collection_after_a_confirmation_listing_what_goes(page, admin_user, handbook):
    stored = Paragraph.objects.filter(collection=handbook).count()
    log_in(page)
    page.goto(f"/admin/collections_app/collection/{handbook.pk}/delete/")
    summary = page.inner_text("#delete-summary")
    assert "3 documents" in summary and f"{stored} paragraphs" in summary
    page.click("#confirm-delete")
    page.wait_for_selector("ul.messagelist")
    assert not Collection.objects.filter(pk=handbook.pk).exists() and not Paragraph.objects.exists()


# --- 11. Small things -----------------------------------------------------------------------------------


def test_reloading_the_new_key_page_issues_no_second_key(page, admin_user, agent):
    log_in(page)
    page.goto(f"/admin/collections_app/agent/{agent.pk}/change/")
    page.fill("#issue-key-name", "helpdesk bot")
    page.click("#issue-key-button")
    raw = page.inner_text("[data-role=raw-key]")
    assert ApiKey.objects.filter(agent=agent, name="helpdesk bot").count() == 1
    page.reload()  # the browser re-posts the form
    assert "already shown once" in messages_text(page)
    assert raw not in page.content()
    assert ApiKey.objects.filter(agent=agent, name="helpdesk bot").count() == 1


def test_the_header_and_no_view_site(page, admin_user):
    log_in(page)
    assert page.inner_text("#site-name") == "ragsite"
    assert page.locator("#user-tools >> text=View site").count() == 0


# --- 12. Layout at 1280 px and 390 px ----------------------------------------------------------------------


def test_at_1280_the_paragraph_text_has_half_the_table(page, admin_user, library):
    page.set_viewport_size({"width": 1280, "height": 900})
    log_in(page)
    page.goto(f"/admin/collections_app/paragraph/?collection__id__exact={library.pk}")
    table = page.locator("#result_list").bounding_box()
    text = page.locator("#result_list td.field-excerpt >> nth=0").bounding_box()
    assert text["width"] >= 0.5 * table["width"], (text, table)
    screenshot(page, "1280-paragraphs")
    page.goto(f"/admin/collections_app/collection/{library.pk}/change/")
    history = page.locator("table.rs-history").bounding_box()
    box = page.locator(".field-build_history").bounding_box()
    assert history["x"] + history["width"] <= box["x"] + box["width"] + 1  # not clipped on the right
    screenshot(page, "1280-collection")


@pytest.mark.parametrize("width", [1280, 1024])
def test_a_build_history_with_long_warnings_is_never_cut_off(page, admin_user, handbook, width):
    """Long warnings on the latest builds: at 1280 px the history fits its row; narrower, its box
    scrolls sideways, and nothing of it lies past the row, whose overflow is hidden. The warnings list
    starts at its cell (the admin indents every list in a form by 170 px, which pushed it out of view)."""
    note = (
        "19 paragraphs have no label, so any reader may read them; the measured floor 0.130389 keeps 31 of "
        "31 answers found: answers and controls do not separate"
    )
    handbook.runs.update(warnings=[note, note])
    page.set_viewport_size({"width": width, "height": 900})
    log_in(page)
    page.goto(f"/admin/collections_app/collection/{handbook.pk}/change/")
    row = page.locator(".field-build_history").bounding_box()
    shown = page.locator(".field-build_history .rs-scroll").bounding_box()
    assert shown["x"] + shown["width"] <= row["x"] + row["width"] + 1, (shown, row)
    cell = page.locator("table.rs-history tbody td:last-child >> nth=0").bounding_box()
    warnings = page.locator("table.rs-history ul.rs-warnings >> nth=0").bounding_box()
    assert warnings["x"] - cell["x"] < 30, (
        warnings,
        cell,
    )  # not indented as the admin indents a form's lists
    if width == 1280:
        history = page.locator("table.rs-history").bounding_box()
        assert history["x"] + history["width"] <= row["x"] + row["width"] + 1, (history, row)


@pytest.mark.parametrize("screen", ["paragraphs", "collection", "playground"])
def test_at_390_the_work_screens_need_no_sideways_scroll(page, admin_user, handbook, screen):
    page.set_viewport_size({"width": 390, "height": 844})
    log_in(page)
    if screen == "paragraphs":
        page.goto(f"/admin/collections_app/paragraph/?collection__id__exact={handbook.pk}")
    elif screen == "collection":
        page.goto(f"/admin/collections_app/collection/{handbook.pk}/change/")
    else:
        page.goto(f"/admin/collections_app/collection/playground/?collection={handbook.pk}")
        page.fill("#id_question", "how many days of annual leave carry over")
        page.click("#playground-submit")
        page.wait_for_selector("#playground-result")
    assert horizontal_overflow(page) <= 0
    screenshot(page, f"390-{screen}")
