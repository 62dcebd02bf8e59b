"""The admin's agents, keys and spend pages."""
# ruff: noqa: F811  (fixtures imported from test_admin are requested by name)

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from collections_app.models import (
    ApiKey,
    ModelCall,
)
from collections_app.services.agents import authenticate, issue_key
from collections_app.services.ledger import record_call, spend_by_day

from .test_admin import run_on_commit, texts, url  # noqa: F401

pytestmark = pytest.mark.django_db


def issue_token(admin_client, agent) -> str:
    page = admin_client.get(url("agent_change", agent.pk)).content.decode()
    return page.split('name="token" value="')[1].split('"')[0]


def test_a_new_key_is_shown_once_and_only_its_hash_is_kept(admin_client, agent):
    token = issue_token(admin_client, agent)
    response = admin_client.post(url("agent_issue_key", agent.pk), {"token": token, "name": "helpdesk bot"})
    assert response.status_code == 200 and "no-store" in response["Cache-Control"]
    body = response.content.decode()
    raw = body.split('data-role="raw-key">')[1].split("<")[0]
    assert raw.startswith("rsk_") and authenticate(raw).agent == agent
    key = ApiKey.objects.get(hashed=ApiKey.hash(raw))
    assert raw not in " ".join(texts(response)) and key.prefix == raw[:12]
    page = admin_client.get(url("agent_change", agent.pk)).content.decode()
    assert raw not in page and key.prefix in page
    assert key.name == "helpdesk bot"
    # Reloading the page that showed it re-posts the used token: no second key, and the key is not shown
    # again.
    again = admin_client.post(url("agent_issue_key", agent.pk), {"token": token, "name": "helpdesk bot"})
    assert again.status_code == 302 and any("already shown once" in m for m in texts(again))
    assert raw not in again.content.decode() and agent.keys.count() == 2  # the fixture's key and this one


def test_revoking_a_key_asks_first_then_revokes(admin_client, agent):
    key, raw = issue_key(agent=agent, name="spare")
    page = admin_client.get(url("agent_change", agent.pk)).content.decode()
    assert url("apikey_revoke", key.pk) in page
    confirm = admin_client.get(url("apikey_revoke", key.pk))
    assert confirm.status_code == 200 and "Yes, revoke it" in confirm.content.decode()
    assert authenticate(raw) is not None
    response = admin_client.post(url("apikey_revoke", key.pk))
    assert response.status_code == 302 and response["Location"] == url("agent_change", agent.pk)
    assert authenticate(raw) is None
    key.refresh_from_db()
    assert key.revoked_at is not None
    others = admin_client.post(
        url("apikey_changelist"),
        {"action": "revoke", "_selected_action": [agent.keys.exclude(pk=key.pk).get().pk]},
    )
    assert others.status_code == 302 and not agent.keys.filter(revoked_at__isnull=True).exists()


def test_budget_and_runaway_limit_are_editable(admin_client, agent):
    keys = list(agent.keys.all())
    data = {
        "name": "Alpha",
        "daily_budget": "2.5000",
        "runaway_limit": "30",
        "keys-TOTAL_FORMS": len(keys),
        "keys-INITIAL_FORMS": len(keys),
        "keys-MIN_NUM_FORMS": 0,
        "keys-MAX_NUM_FORMS": 1000,
    }
    for i, key in enumerate(keys):
        data.update({f"keys-{i}-id": key.pk, f"keys-{i}-agent": agent.pk, f"keys-{i}-name": key.name})
    response = admin_client.post(url("agent_change", agent.pk), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    agent.refresh_from_db()
    assert (agent.daily_budget, agent.runaway_limit) == (Decimal("2.5"), 30)


def test_spend_by_day_sums_the_ledger_per_day_with_empty_days(agent, settings):
    settings.MODEL_PRICES = {"judge-mini": {"input": 1, "output": 2}}
    record_call(
        agent=agent,
        collection=None,
        purpose=ModelCall.JUDGE,
        model="judge-mini",
        tokens_in=1000,
        tokens_out=500,
    )
    record_call(agent=agent, collection=None, purpose=ModelCall.JUDGE, model="judge-mini", tokens_in=500)
    old = record_call(
        agent=agent, collection=None, purpose=ModelCall.JUDGE, model="judge-mini", tokens_in=1000
    )
    ModelCall.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    ancient = record_call(
        agent=agent, collection=None, purpose=ModelCall.JUDGE, model="judge-mini", tokens_in=1000
    )
    ModelCall.objects.filter(pk=ancient.pk).update(created_at=timezone.now() - timedelta(days=40))
    days = spend_by_day(agent, days=30)
    assert len(days) == 30 and days[-1].day == timezone.localdate()
    assert (days[-1].calls, days[-1].tokens_in, days[-1].tokens_out, days[-1].cost) == (
        2,
        1500,
        500,
        Decimal("2.5"),
    )
    assert (days[-4].calls, days[-4].cost) == (1, Decimal("1"))
    assert sum(d.calls for d in days) == 3 and days[0].calls == 0


def test_the_agent_page_shows_spend_as_a_table_and_a_chart(admin_client, agent, settings):
    settings.MODEL_PRICES = {"judge-mini": {"input": 1, "output": 2}}
    record_call(
        agent=agent,
        collection=None,
        purpose=ModelCall.JUDGE,
        model="judge-mini",
        tokens_in=1000,
        tokens_out=500,
    )
    agent.daily_budget = Decimal("1")
    agent.save()
    body = admin_client.get(url("agent_change", agent.pk)).content.decode()
    assert '<svg class="rs-spend-chart"' in body and body.count('class="rs-spend-bar') == 30
    assert timezone.localdate().strftime("%Y-%m-%d") in body and "2.0000" in body
    # The budget is a line on the chart, today's bar is marked over it, and the page says so in words.
    assert 'class="rs-budget-line"' in body and body.count("rs-spend-bar rs-over") == 1
    assert "over budget: the judge is not called" in body
    listing = admin_client.get(url("agent_changelist")).content.decode()
    assert "2.0000 (over budget)" in listing


def test_the_daily_budget_names_its_currency(admin_client, agent, settings):
    from decimal import Decimal

    from django.urls import reverse

    agent.daily_budget = Decimal("2.5")
    agent.save()
    settings.LEDGER_CURRENCY = "EUR"
    page = admin_client.get(reverse("admin:collections_app_agent_change", args=[agent.pk])).content.decode()
    assert "Daily budget (EUR)" in page and "Spend per day in EUR" in page
    assert "of a 2.5000 EUR daily budget" in page and "cost (EUR)" in page
