"""What a new librarian met on the screens (issue 30), clicked through in a real chromium.

Run with `pytest -m browser`; skipped with the reason when /usr/bin/chromium is missing.
"""

import pytest

from collections_app.models import Collection
from collections_app.services.agents import create_agent
from tests.conftest import HANDBOOK

from .browser import log_in
from .conftest import make_built

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def offered_folders(page) -> list[str]:
    """The folder choices a person can pick now (hidden groups are not offered)."""
    return page.eval_on_selector_all(
        "#id_folder optgroup:not([disabled]) option", "options => options.map(o => o.value)")


def test_add_collection_offers_only_the_picked_agents_folders_before_save(page, admin_user, agent, knowledge_root):
    helpdesk, _ = create_agent(agent_id="helpdesk")
    create_agent(agent_id="empty")
    knowledge_root("alpha", "licenses", {"a.md": "# A\n\nText.\n"})
    knowledge_root("alpha", "handbook", {"a.md": "# A\n\nText.\n"})
    knowledge_root("helpdesk", "hr-share", {"b.md": "# B\n\nText.\n"})
    log_in(page)
    page.goto("/admin/collections_app/collection/add/")
    assert sorted(offered_folders(page)) == ["handbook", "hr-share", "licenses"]  # no agent yet: all, grouped
    page.select_option("#id_agent", label="helpdesk")
    assert offered_folders(page) == ["hr-share"]
    page.select_option("#id_folder", "hr-share")
    page.select_option("#id_agent", label="alpha")
    assert sorted(offered_folders(page)) == ["handbook", "licenses"]
    assert page.input_value("#id_folder") == ""  # helpdesk's folder is not kept for alpha
    page.select_option("#id_agent", label="empty")
    assert offered_folders(page) == [] and page.is_visible("#folder-none")
    page.select_option("#id_agent", label="helpdesk")
    assert not page.is_visible("#folder-none")
    page.fill("#id_name", "hr")
    page.select_option("#id_folder", "hr-share")
    page.click("input[name=_save]")
    page.wait_for_selector("ul.messagelist")
    assert Collection.objects.get(name="hr").agent == helpdesk


def test_the_landing_page_leads_to_the_admin_and_the_api_docs(page, admin_user):
    response = page.goto("/")
    assert response.status == 200  # a new user opening the printed address got a 404
    page.click("#home-admin")
    page.wait_for_selector("#login-form")
    page.goto("/")
    page.click("#home-api-docs")
    page.wait_for_selector(".swagger-ui .info")


def test_the_api_docs_try_it_out_searches_with_a_pasted_key(page, agent_key, knowledge_folder):
    agent, raw = agent_key
    make_built(agent, knowledge_folder, "handbook", HANDBOOK)
    page.goto("/api/v1/docs")
    page.click(".swagger-ui .btn.authorize")
    page.fill(".swagger-ui .modal-ux input", raw)
    page.click(".swagger-ui .modal-ux .auth-btn-wrapper .authorize")
    page.click(".swagger-ui .modal-ux .btn-done")
    operation = page.locator(".opblock", has=page.locator("[data-path='/api/v1/collections/{name}/search']"))
    operation.locator(".opblock-summary").first.click()
    operation.locator(".try-out__btn").click()
    operation.locator("input[placeholder=name]").fill("handbook")
    operation.locator(".execute").click()
    status = operation.locator(".live-responses-table tbody .response-col_status").first
    status.wait_for()
    body = operation.locator(".live-responses-table tbody .response-col_description pre").first.inner_text()
    assert status.inner_text().strip() == "200", body  # the generated example answered 403
    assert "capped at five days" in body


def test_measure_says_how_long_it_will_take_before_it_starts(page, admin_user, agent, knowledge_folder):
    notes = {f"note-{n}.md": f"# Note {n}\n\nThe archive keeps box {n}.\n\nThe canteen serves soup {n}.\n"
             for n in range(8)}
    archive = make_built(agent, knowledge_folder, "archive", notes, size=40)
    fresh = make_built(agent, knowledge_folder, "fresh", {"a.md": "# A\n\nOne paragraph only.\n"})
    log_in(page)
    page.goto(f"/admin/collections_app/collection/{archive.pk}/change/")
    page.click("text=Measure")
    page.wait_for_selector("#measure-form")
    page.select_option("#id_collection", str(archive.pk))
    page.wait_for_selector("#measure-estimate:not([hidden])")
    assert "expect roughly" in page.inner_text("#measure-estimate")
    page.select_option("#id_collection", str(fresh.pk))
    page.wait_for_function("document.getElementById('measure-estimate').textContent.includes('No build')")


def test_an_empty_spend_page_says_why(page, admin_user, agent, settings):
    settings.EMBED_BACKEND, settings.JUDGE_URL, settings.RERANK_URL = "hash", "", ""
    log_in(page)
    page.click("#content-main a:text-is('Agents')")
    page.click(f"#result_list a:text-is('{agent.agent_id}')")
    said = page.inner_text("#spend-empty")
    assert "No model calls in the last 30 days" in said
    assert "this server uses none" in said and "searches and builds cost nothing" in said
    settings.JUDGE_URL = "http://127.0.0.1:9/judge"
    page.reload()
    assert "calls a remote judge; none of their calls was charged to this agent" in page.inner_text("#spend-empty")
