"""Folder sync and webhooks in the admin (issue 26): with Django's client, and by clicking in Chromium."""

import re

import pytest
from django.urls import reverse

from collections_app.models import BuildRun, CollectionSync, Webhook, WebhookDelivery
from collections_app.services.builds import build_collection
from tests.servers import WebhookReceiver, serving

from .browser import log_in, messages_text
from .conftest import HANDBOOK


def url(name, *args):
    return reverse(f"admin:collections_app_{name}", args=args)


def collection_form(collection, **changes) -> dict:
    form = {
        "built_from": collection.built_from,
        "folder": collection.folder,
        "method": collection.method,
        "size": collection.size or "",
        "overlap": collection.overlap or "",
        "min_score": "",
        "around": "",
    }
    return {**form, **changes}


@pytest.mark.django_db
def test_the_collection_form_switches_sync_on_and_off_and_shows_the_checks(admin_client, handbook):
    page = admin_client.get(url("collection_change", handbook.pk)).content.decode()
    assert "Keep in sync" in page and "— (not syncing)" in page
    saved = admin_client.post(
        url("collection_change", handbook.pk), collection_form(handbook, sync="on", sync_every="7")
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]
    state = CollectionSync.objects.get(collection=handbook)
    assert (state.enabled, state.every) == (True, 7) and state.next_check_at is not None
    page = admin_client.get(url("collection_change", handbook.pk)).content.decode()
    assert state.next_check_at.isoformat() in page and "never" in page  # next check; not checked yet
    assert "every 7 min" in admin_client.get(url("collection_changelist")).content.decode()
    # A period out of range is refused by the form; nothing changes.
    refused = admin_client.post(
        url("collection_change", handbook.pk), collection_form(handbook, sync="on", sync_every="0")
    )
    assert refused.status_code == 200 and CollectionSync.objects.get(collection=handbook).every == 7
    admin_client.post(url("collection_change", handbook.pk), collection_form(handbook, sync_every="7"))
    assert not CollectionSync.objects.get(collection=handbook).enabled


@pytest.mark.django_db
def test_a_webhook_to_a_private_address_is_refused_unless_allowed(admin_client, agent, settings):
    form = {
        "agent": agent.pk,
        "url": "http://127.0.0.1:9/hook",
        "events": ["build.succeeded"],
        "active": "on",
    }
    settings.WEBHOOK_ALLOW_PRIVATE = False
    refused = admin_client.post(url("webhook_add"), form).content.decode()
    assert "private, loopback, link-local" in refused and not Webhook.objects.exists()
    refused = admin_client.post(
        url("webhook_add"), {**form, "url": "gopher://93.184.216.34/"}
    ).content.decode()
    assert "http:// or https://" in refused and not Webhook.objects.exists()
    settings.WEBHOOK_ALLOW_PRIVATE = True
    created = admin_client.post(url("webhook_add"), form)
    hook = Webhook.objects.get()
    assert hook.events == ["build.succeeded"]
    # Shown once, in the answer to its creation, and never again.
    assert created.status_code == 200 and hook.secret in created.content.decode()
    assert "no-store" in created["Cache-Control"]
    assert hook.secret not in admin_client.get(url("webhook_change", hook.pk)).content.decode()
    # A leaked secret is replaced by an action of the list, which shows the new one once.
    old = hook.secret
    rotated = admin_client.post(
        url("webhook_changelist"), {"action": "give_new_secrets", "_selected_action": [hook.pk]}
    )
    hook.refresh_from_db()
    assert hook.secret != old and hook.secret.startswith("whsec_")
    assert hook.secret in rotated.content.decode() and old not in rotated.content.decode()
    assert hook.secret not in admin_client.get(url("webhook_change", hook.pk)).content.decode()


@pytest.mark.django_db
def test_a_webhook_secret_is_shown_to_no_one_after_creation_and_is_encrypted_at_rest(
    admin_client, client, agent, settings, django_user_model
):
    from django.contrib.auth.models import Permission
    from django.db import connection

    settings.WEBHOOK_ALLOW_PRIVATE = True
    hook = Webhook.objects.create(agent=agent, url="http://127.0.0.1:9/", events=["build.succeeded"])
    viewer = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(Permission.objects.get(codename="view_webhook"))
    client.force_login(viewer)
    for who in (client, admin_client):
        page = who.get(url("webhook_change", hook.pk))
        assert page.status_code == 200 and hook.secret not in page.content.decode()
        assert "(hidden)" in page.content.decode()
        listed = who.get(url("webhook_changelist")).content.decode()
        assert hook.secret not in listed
    # The viewer may not rotate (and so never sees a new one).
    client.post(url("webhook_changelist"), {"action": "give_new_secrets", "_selected_action": [hook.pk]})
    assert Webhook.objects.get().secret == hook.secret
    # The row holds a Fernet token, not the secret; the model reads it back plain.
    with connection.cursor() as cursor:
        cursor.execute("SELECT secret FROM collections_app_webhook WHERE id = %s", [hook.pk])
        [stored] = cursor.fetchone()
    assert stored.startswith("fernet:") and hook.secret not in stored and hook.secret[6:] not in stored
    assert Webhook.objects.get(pk=hook.pk).secret == hook.secret


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_staff_register_a_webhook_and_switch_sync_on_by_clicking(
    page, admin_user, agent, knowledge_folder, settings
):
    from collections_app.services.agents import create_collection

    settings.WEBHOOK_ALLOW_PRIVATE = True
    knowledge_folder("handbook", HANDBOOK)
    handbook = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    with serving(WebhookReceiver(statuses=[500])) as receiver:
        log_in(page)
        page.goto(url("webhook_add"))
        page.select_option("#id_agent", str(agent.pk))
        page.fill("#id_url", receiver.url + "/board")
        page.check("input[name=events][value='build.succeeded']")
        page.check("input[name=events][value='known_answers.lost']")
        page.click("input[name=_continue]")
        page.wait_for_selector("[data-role=webhook-secret]")
        hook = Webhook.objects.get()
        assert hook.events == ["build.succeeded", "known_answers.lost"]
        assert page.inner_text("[data-role=webhook-secret]") == hook.secret  # shown once, now
        page.goto(url("webhook_change", hook.pk))
        assert page.locator("[data-role=webhook-secret]").count() == 0
        assert hook.secret not in page.content()

        # Sync on from the collection page: its next check is shown.
        page.goto(url("collection_change", handbook.pk))
        page.check("#id_sync")
        page.fill("#id_sync_every", "3")
        page.click("input[name=_continue]")
        page.wait_for_selector("ul.messagelist")
        assert "was changed successfully" in messages_text(page)
        state = CollectionSync.objects.get(collection=handbook)
        assert state.every == 3 and page.is_checked("#id_sync")
        assert (
            page.inner_text(".field-sync_next_check")
            .strip()
            .endswith(state.next_check_at.astimezone().strftime("%Y-%m-%d %H:%M:%S"))
        )

        # A build: its delivery failed once (HTTP 500) and waits for its retry; the hook's page says so.
        assert build_collection(collection=handbook).status == BuildRun.SUCCEEDED
        delivery = WebhookDelivery.objects.get()
        assert (delivery.status, delivery.response_status) == ("pending", 500)
        page.goto(url("webhook_change", hook.pk))
        row = page.inner_text("table.rs-deliveries tbody tr")
        assert "build.succeeded" in row and "pending" in row and "500" in row
        # "Try again now" from the deliveries list sends it; the receiver answers 200 this time.
        page.goto(url("webhookdelivery_changelist"))
        page.check("input.action-select")
        page.select_option("select[name=action]", "try_again_now")
        page.click("button[name=index]")
        page.wait_for_selector("ul.messagelist")
        assert "1 deliveries queued again" in messages_text(page)
        delivery.refresh_from_db()
        assert (delivery.status, delivery.attempts, delivery.response_status) == ("delivered", 2, 200)
        assert len(receiver.requests) == 2


@pytest.mark.django_db
def test_a_new_folder_collection_syncs_and_its_page_says_when_the_folder_changed(
    admin_client, agent, knowledge_root, run_on_commit
):
    from collections_app.models import Collection
    from collections_app.services import sync_check

    folder = knowledge_root(agent.agent_id, "share", HANDBOOK)
    add = admin_client.get(url("collection_add")).content.decode()
    assert re.search(r'<input[^>]*name="sync"[^>]*checked', add)  # ticked on a new collection
    assert re.search(r'<input[^>]*name="sync_every"[^>]*value="5"', add)
    form = {"agent": agent.pk, "name": "share", "folder": "share", "method": "fixed", "size": "80"}
    form.update(built_from="", overlap="", min_score="", around="", sync="on", sync_every="5")
    saved = admin_client.post(url("collection_add"), form)
    assert saved.status_code == 302, saved.content.decode()[:3000]
    collection = Collection.objects.get(name="share")
    state = CollectionSync.objects.get(collection=collection)
    assert state.enabled and state.every == 5
    with run_on_commit(execute=True):
        build_collection(collection=collection)
    page = admin_client.get(url("collection_change", collection.pk)).content.decode()
    assert "folder-changed" not in page
    (folder / "leave.md").write_text("# Leave\n\nCarry-over is now capped at three days a year.\n")
    with run_on_commit(execute=False):  # the check sees it; its build has not run yet
        found = sync_check.check_source(collection=collection)
    assert found.changed == ["leave.md"] and found.build is not None
    page = admin_client.get(url("collection_change", collection.pk)).content.decode()
    assert 'data-role="folder-changed"' in page and "since the last build" in page
    assert f"build {found.build.pk}" in " ".join(page.split())
