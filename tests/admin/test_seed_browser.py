"""Seed 000's built_from and budgets, as a person meets them in the admin: Chromium on the real forms."""

import pytest

from collections_app.models import Agent, Collection

from .browser import log_in  # the `page` fixture comes from conftest

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_seed_built_from_that_looks_like_a_path_is_refused_on_the_collection_form(page, admin_user, handbook):  # noqa: F811
    """Seed 000: built_from "is for a person, not a program ... never a path"."""
    log_in(page)
    page.goto(f"/admin/collections_app/collection/{handbook.pk}/change/")
    page.fill("#id_built_from", "/srv/shares/hr-policies")
    page.click("input[name=_save]")
    page.wait_for_selector(".errorlist")
    assert "never where they are" in page.inner_text(".field-built_from")
    assert Collection.objects.get(pk=handbook.pk).built_from == "the HR share"
    page.fill("#id_built_from", "the HR policies share")
    page.click("input[name=_save]")
    page.wait_for_selector("ul.messagelist")
    assert Collection.objects.get(pk=handbook.pk).built_from == "the HR policies share"


def test_a_negative_daily_budget_is_refused_on_the_agent_form(page, admin_user, agent):  # noqa: F811
    log_in(page)
    page.goto(f"/admin/collections_app/agent/{agent.pk}/change/")
    page.fill("#id_daily_budget", "-5")
    page.click("input[name=_save]")
    page.wait_for_selector(".errorlist")
    assert "at least 0" in page.inner_text(".field-daily_budget")
    assert Agent.objects.get(pk=agent.pk).daily_budget is None
