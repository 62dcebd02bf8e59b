"""What a new librarian met on the screens (issue 30), clicked through in a real chromium.

Run with `pytest -m browser`; skipped with the reason when /usr/bin/chromium is missing.
"""

import pytest

from collections_app.models import Collection
from collections_app.services.agents import create_agent

from .browser import log_in

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
