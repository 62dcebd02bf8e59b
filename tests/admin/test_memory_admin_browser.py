"""The memory admin in a real browser: a long memory's nodes, and a repair from the health page."""

import pytest

from memory_app import services
from memory_app.models import MEMORY, RecordNode
from tests.memory.conftest import prose

from . import browser
from .test_memory_admin import MARKUP, embedder  # noqa: F401 (the module's autouse embedder)


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_long_memory_in_the_browser_and_a_repair_from_the_health_page(page, admin_user, agent):
    # Tests run tasks synchronously, so storing builds the nodes at once; the second record's are
    # then deleted, as if its build had never run.
    memory, _ = services.store_memory(agent=agent, text=prose(150) + MARKUP + prose(100, seed=2))
    nodes = services.record_nodes(MEMORY, memory.pk)
    assert len(nodes) >= 4
    missing, _ = services.store_memory(agent=agent, text=prose(200, seed=8))
    RecordNode.objects.filter(parent_kind=MEMORY, parent_id=missing.pk).delete()

    browser.log_in(page)
    page.goto(f"/admin/memory_app/memory/{memory.pk}/change/")
    text = page.locator("#record-text")
    text.wait_for()
    assert text.evaluate("el => el.textContent") == memory.text
    spans = page.locator("#record-text .rs-node")
    assert spans.count() == len(nodes)
    assert spans.nth(1).get_attribute("title") == (
        f"node 1: {nodes[1].start_char}–{nodes[1].end_char}, {nodes[1].token_count} tokens"
    )
    colours = [spans.nth(i).evaluate("el => getComputedStyle(el).backgroundColor") for i in range(3)]
    assert colours[0] == colours[2] != colours[1] and "0, 0, 0, 0" not in colours[0]  # alternating, visible
    assert page.locator("table.rs-node-table tbody tr").count() == len(nodes)
    page.hover("table.rs-node-table tr[data-node='2']")
    assert "rs-node-hover" in page.locator("#node-2").get_attribute("class")

    page.goto("/admin/memory_app/memory/")
    page.click("#memory-health")
    page.wait_for_selector("#health-report")
    assert page.inner_text("[data-role=missing] .rs-count") == "1"
    assert f"mem:{missing.pk}" in page.inner_text("#health-missing")
    page.click("#repair-now")
    page.wait_for_selector("ul.messagelist")
    said = browser.messages_text(page)
    assert f"Repair: built the nodes of 1 record (mem:{missing.pk};" in said and "0 remain" in said
    assert page.inner_text("[data-role=missing] .rs-count") == "0"
    assert page.locator("[data-role=none-missing]").is_visible()
    rebuilt = services.record_nodes(MEMORY, missing.pk)
    assert len(rebuilt) > 1 and rebuilt[-1].end_char == len(missing.text)
