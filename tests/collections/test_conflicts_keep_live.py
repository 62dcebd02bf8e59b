"""A newer file that contradicts a live document never takes the live one out of search.

The newcomer's report: a new password-policy.md ("rotated every 90 days") conflicted with the live
security handbook ("every 180 days"); both went to review, the handbook's answers and the new file's
unrelated section vanished, and the build said `succeeded`."""

import pytest

from collections_app.models import BuildRun, Collection, Document, Paragraph, Webhook, WebhookDelivery
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.review import approval_warnings, approve_documents
from collections_app.services.search import search_collection

pytestmark = pytest.mark.django_db

HANDBOOK = (
    "# Passwords\n\nPasswords of staff accounts are rotated every 180 days by the IT desk.\n\n"
    "# Stolen laptops\n\nReport a stolen laptop at once by calling the IT desk on extension 4242.\n"
)
POLICY = (
    "# Passwords\n\nPasswords of staff accounts are rotated every 90 days by the IT desk.\n\n"
    "# Guest Wi-Fi\n\nVisitors join the guest wireless network called Lobby with the code on the badge.\n"
)


@pytest.fixture
def live(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="it", method="structure")
    folder = knowledge_folder("it", {"security-handbook.md": HANDBOOK})
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    collection.folder_path = folder
    return collection


def answer(collection, question: str) -> str:
    found = search_collection(agent=collection.agent, collection=collection, question=question, min_score=0)
    return " ".join(p["text"] for p in found["paragraphs"])


def test_the_live_document_keeps_answering_and_only_the_newer_paragraph_waits(live, agent):
    hook = Webhook.objects.create(
        agent=agent,
        url="http://127.0.0.1:9/",
        events=[Webhook.BUILD_SUCCEEDED, Webhook.DOCUMENT_NEEDS_REVIEW],
    )
    (live.folder_path / "password-policy.md").write_text(POLICY)
    run = build_collection(collection=live)

    # Said at once: the build's own status, its warnings, and the webhooks.
    assert run.status == BuildRun.SUCCEEDED_WITH_REVIEW and run.documents_in_review == 1
    assert any(w.startswith("password-policy.md: 1 paragraph waits in review") for w in run.warnings)
    events = sorted(WebhookDelivery.objects.filter(webhook=hook).values_list("event", flat=True))
    assert events == ["build.succeeded_with_review", "document.needs_review"]
    told = WebhookDelivery.objects.get(webhook=hook, event="document.needs_review").payload["data"]
    assert told["review"] == {"documents": 1, "waiting": 1} and told["build"]["id"] == run.pk

    handbook = live.documents.get(name="security-handbook.md")
    policy = live.documents.get(name="password-policy.md")
    assert handbook.status == Document.ACTIVE and not handbook.review_paragraphs
    assert policy.status == Document.ACTIVE and policy.review_paragraphs
    held = Paragraph.objects.filter(document=policy, in_review=True)
    assert [p.text for p in held] == [p.text for p in policy.paragraphs.all() if "90 days" in p.text]

    rotation = answer(live, "how often are passwords rotated")
    assert "every 180 days" in rotation and "every 90 days" not in rotation
    assert "extension 4242" in answer(live, "who do I call when my laptop is stolen")
    assert "Lobby" in answer(live, "guest wireless network for visitors")  # the newer file's unrelated part

    # Nothing changed: the next build leaves it as it is, still saying what waits, with no new event.
    again = build_collection(collection=live)
    assert again.status == BuildRun.SUCCEEDED_WITH_REVIEW
    assert WebhookDelivery.objects.filter(webhook=hook, event="document.needs_review").count() == 1
    assert "every 180 days" in answer(live, "how often are passwords rotated")

    # Approved under keep_live: the newer paragraph answers beside the older, and the approval says so.
    assert approval_warnings([policy]) == [
        "password-policy.md conflicts with security-handbook.md, which is already searched: agents will "
        "get both answers"
    ]
    approve_documents([policy], by="librarian")
    both = answer(live, "how often are passwords rotated")
    assert "every 180 days" in both and "every 90 days" in both
    assert build_collection(collection=live).status == BuildRun.SUCCEEDED


def test_newer_replaces_switches_the_older_paragraph_off_once_the_newer_is_approved(live):
    Collection.objects.filter(pk=live.pk).update(on_conflict=Collection.NEWER_REPLACES)
    live.refresh_from_db()
    (live.folder_path / "password-policy.md").write_text(POLICY)
    build_collection(collection=live)
    assert "every 90 days" not in answer(live, "how often are passwords rotated")  # waits until approved
    policy = live.documents.get(name="password-policy.md")
    assert approval_warnings([policy]) == [
        "password-policy.md conflicts with security-handbook.md, which is already searched: its conflicting "
        "paragraphs are switched off, replaced by the approved version"
    ]
    approve_documents([policy], by="librarian")
    rotation = answer(live, "how often are passwords rotated")
    assert "every 90 days" in rotation and "every 180 days" not in rotation
    assert "extension 4242" in answer(live, "who do I call when my laptop is stolen")  # the rest stays
    # A rebuild keeps it so: the switched-off paragraph stays off, the approved one stays on.
    assert build_collection(collection=live).status == BuildRun.SUCCEEDED
    rotation = answer(live, "how often are passwords rotated")
    assert "every 90 days" in rotation and "every 180 days" not in rotation


def test_a_changed_file_that_now_contradicts_a_live_one_waits_and_its_old_version_is_not_served(live):
    (live.folder_path / "password-policy.md").write_text(POLICY.replace("90 days", "180 days"))
    assert build_collection(collection=live).status == BuildRun.SUCCEEDED  # agrees: nothing to review
    (live.folder_path / "password-policy.md").write_text(POLICY.replace("90 days", "30 days"))
    run = build_collection(collection=live)
    assert run.status == BuildRun.SUCCEEDED_WITH_REVIEW
    rotation = answer(live, "how often are passwords rotated")
    assert "every 180 days" in rotation and "every 30 days" not in rotation
    assert "Lobby" in answer(live, "guest wireless network for visitors")


def test_a_scan_warning_still_holds_the_whole_document(live, knowledge_folder):
    """Only a conflict is per paragraph; a document the reader may have misread waits whole."""
    (live.folder_path / "password-policy.md").write_text(POLICY)
    run = build_collection(collection=live)
    assert run.status == BuildRun.SUCCEEDED_WITH_REVIEW
    # A copy of a live document is the newer side too: the live one keeps answering.
    (live.folder_path / "copy.md").write_text(HANDBOOK)
    run = build_collection(collection=live)
    copy = live.documents.get(name="copy.md")
    assert copy.status == Document.NEEDS_REVIEW
    assert live.documents.get(name="security-handbook.md").status == Document.ACTIVE
    assert "extension 4242" in answer(live, "who do I call when my laptop is stolen")


def test_an_unchanged_rebuild_marks_the_waiting_paragraph_again_in_one_statement_that_writes_nothing(live):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    (live.folder_path / "password-policy.md").write_text(POLICY)
    assert build_collection(collection=live).status == BuildRun.SUCCEEDED_WITH_REVIEW
    with CaptureQueriesContext(connection) as queries:
        run = build_collection(collection=live)
    assert run.status == BuildRun.SUCCEEDED_WITH_REVIEW and run.documents_in_review == 1
    table = Paragraph._meta.db_table
    marks = [q["sql"] for q in queries.captured_queries if q["sql"].startswith(f'UPDATE "{table}"')]
    assert len(marks) == 1  # the waiting document's paragraphs, looked at once; the live one's not at all
    policy = live.documents.get(name="password-policy.md")
    waiting = Paragraph.objects.filter(document=policy, in_review=True)
    assert list(waiting.values_list("index", flat=True)) == [0]
    assert "rotated every 180 days" in answer(live, "How often are staff passwords rotated?")
