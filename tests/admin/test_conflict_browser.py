"""The newcomer's scenario in Chromium: a new file in a synced folder contradicts the live handbook.

The handbook keeps answering, the new file's unrelated section answers, its conflicting paragraph waits,
and the collection page says so at the top, from the build that put it there; the hook hears of it."""

import json

import pytest
from django.urls import reverse

from collections_app.models import BuildRun, Webhook
from collections_app.services import sync, sync_check
from collections_app.services.agents import create_collection
from collections_app.services.search import search_collection
from tests.servers import WebhookReceiver, serving

from .browser import log_in

HANDBOOK = (
    "# Passwords\n\nPasswords of staff accounts are rotated every 180 days by the IT desk.\n\n"
    "# Stolen laptops\n\nReport a stolen laptop at once by calling the IT desk on extension 4242.\n"
)
POLICY = (
    "# Passwords\n\nPasswords of staff accounts are rotated every 90 days by the IT desk.\n\n"
    "# Guest Wi-Fi\n\nVisitors join the guest wireless network called Lobby with the code on the badge.\n"
)


def answer(collection, question: str) -> str:
    found = search_collection(agent=collection.agent, collection=collection, question=question, min_score=0)
    return " ".join(p["text"] for p in found["paragraphs"])


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
def test_a_conflicting_file_in_a_synced_folder_keeps_the_live_document_and_the_page_warns(
    page, admin_user, agent, knowledge_folder, settings
):
    settings.WEBHOOK_ALLOW_PRIVATE = True
    folder = knowledge_folder("it", {"security-handbook.md": HANDBOOK})
    collection = create_collection(agent=agent, name="it", method="structure")
    sync.set_sync(collection=collection, every=1)
    # Tasks run synchronously in tests: a check's build is done when the check returns.
    first = sync_check.check_source(collection=collection)
    first.build.refresh_from_db()
    assert first.build.status == BuildRun.SUCCEEDED

    with serving(WebhookReceiver()) as receiver:
        Webhook.objects.create(
            agent=agent,
            url=receiver.url + "/hook",
            events=[Webhook.BUILD_SUCCEEDED, Webhook.DOCUMENT_NEEDS_REVIEW],
        )
        (folder / "password-policy.md").write_text(POLICY)
        check = sync_check.check_source(collection=collection)
        assert check.new == ["password-policy.md"]
        check.build.refresh_from_db()
        assert check.build.status == BuildRun.SUCCEEDED_WITH_REVIEW
        told = sorted(json.loads(r["body"])["event"] for r in receiver.requests)
        assert told == ["build.succeeded_with_review", "document.needs_review"]

    rotation = answer(collection, "how often are passwords rotated")
    assert "every 180 days" in rotation and "every 90 days" not in rotation
    assert "Lobby" in answer(collection, "guest wireless network for visitors")

    log_in(page)
    page.goto(reverse("admin:collections_app_collection_change", args=[collection.pk]))
    warning = page.inner_text("#in-review")
    assert "1 document waiting for review (1 for conflicting paragraphs only)" in warning
    assert "the documents already searched keep answering" in warning
    # The sync outcome names the build and its status.
    outcome = page.inner_text(".field-sync_outcome")
    assert f"build {check.build.pk}" in outcome and "succeeded_with_review" in outcome
    page.click("#in-review a")
    page.wait_for_selector("#result_list tbody .field-name_shown")
    assert page.locator("#result_list tbody .field-name_shown").all_inner_texts() == ["password-policy.md"]
    page.click("#result_list >> text=password-policy.md")
    side = page.locator('table.rs-side-by-side[data-other="security-handbook.md"]')
    assert "90 days" in side.inner_text() and "180 days" in side.inner_text()
