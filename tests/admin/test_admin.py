"""The admin with Django's test client: who may see it, what each screen shows, and that every
action reaches its service."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from collections_app.models import (
    BuildRun,
    Collection,
    CollectionBuilt,
    Document,
    Label,
    Paragraph,
)
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.measure import request_measure
from collections_app.services.readers.labels import set_default_labels
from collections_app.services.review import approve_documents
from collections_app.services.uploads import upload_document

from . import conftest
from .conftest import HANDBOOK, make_built, texts, url

pytestmark = pytest.mark.django_db

# test_admin_agents imports the fixture from here; it is declared once, in conftest.
run_on_commit = conftest.run_on_commit


# --- Who may use it -------------------------------------------------------------------


def admin_urls(collection, agent, key, document, paragraph):
    return [
        url("collection_changelist"),
        url("collection_change", collection.pk),
        url("collection_progress", collection.pk),
        url("collection_playground"),
        url("document_changelist"),
        url("document_change", document.pk),
        url("document_upload"),
        url("paragraph_changelist"),
        url("paragraph_change", paragraph.pk),
        url("label_changelist"),
        url("reader_changelist"),
        url("agent_changelist"),
        url("agent_change", agent.pk),
        url("apikey_changelist"),
        url("apikey_revoke", key.pk),
        url("buildrun_changelist"),
        url("modelcall_changelist"),
    ]


@pytest.fixture
def every_page(handbook, agent):
    key = agent.keys.first()
    document = handbook.documents.first()
    paragraph = Paragraph.objects.filter(collection=handbook).first()
    return admin_urls(handbook, agent, key, document, paragraph)


def test_anonymous_visitors_are_sent_to_the_login_page(client, every_page):
    for page in every_page:
        response = client.get(page)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), page


def test_signed_in_users_who_are_not_staff_are_refused(client, plain_user, every_page, handbook):
    client.force_login(plain_user)
    for page in every_page:
        response = client.get(page)
        assert response.status_code == 302 and response["Location"].startswith("/admin/login/"), page
    response = client.post(url("collection_rebuild", handbook.pk))
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")
    assert handbook.runs.count() == 1


def test_staff_without_permissions_cannot_use_the_custom_pages(client, staff_user, handbook, agent):
    client.force_login(staff_user)
    key = agent.keys.first()
    assert client.get(url("collection_progress", handbook.pk)).status_code == 403
    assert client.get(url("collection_playground")).status_code == 403
    assert client.get(url("document_upload")).status_code == 403
    assert client.post(url("collection_rebuild", handbook.pk)).status_code == 403
    assert client.post(url("agent_issue_key", agent.pk)).status_code == 403
    assert client.post(url("apikey_revoke", key.pk)).status_code == 403
    assert handbook.runs.count() == 1 and agent.keys.count() == 1 and agent.keys.get().revoked_at is None


def test_posts_without_a_csrf_token_are_refused(admin_user, handbook, agent):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.post(url("collection_rebuild", handbook.pk)).status_code == 403
    assert client.post(url("agent_issue_key", agent.pk)).status_code == 403
    assert handbook.runs.count() == 1 and agent.keys.count() == 1
    page = client.get(url("collection_change", handbook.pk)).content.decode()
    assert (
        'action="{}"'.format(url("collection_rebuild", handbook.pk)) in page and "csrfmiddlewaretoken" in page
    )


def test_no_admin_page_shows_a_filesystem_path(admin_client, handbook, agent, settings, tmp_path):
    upload_document(
        collection=handbook, name="extra.md", content=b"# Extra\n\nUploaded paragraph about parking.\n"
    )
    assert build_collection(collection=handbook).status == BuildRun.SUCCEEDED
    uploaded = handbook.documents.get(name="extra.md")
    paragraph = Paragraph.objects.filter(document=uploaded).first()
    pages = admin_urls(handbook, agent, agent.keys.first(), uploaded, paragraph) + [
        url("document_change", handbook.documents.get(name="leave.md").pk),
        url("buildrun_change", handbook.runs.first().pk),
        url("collectionbuilt_changelist"),
        url("paragraph_changelist", query=f"collection__id__exact={handbook.pk}"),
        url("document_delete", uploaded.pk),
        url("collection_delete", handbook.pk),
        url("collection_measure", query=f"collection={handbook.pk}"),
        url(
            "measurerun",
            request_measure(
                collection=handbook, questions=[{"question": "parking", "answer": "parking"}], enqueue=False
            ).pk,
        ),
    ]
    forbidden = ["deployment-secret", str(tmp_path), str(settings.MEDIA_ROOT), "uploads/"]
    for page in pages:
        body = admin_client.get(page).content.decode()
        assert not [f for f in forbidden if f in body], page
    answer = admin_client.post(
        url("collection_playground"), {"collection": handbook.pk, "question": "parking", "most": 5}
    )
    body = answer.content.decode()
    assert "Uploaded paragraph about parking" in body
    assert not [f for f in forbidden if f in body]


# --- Collections ----------------------------------------------------------------------


def test_the_changelist_shows_status_paragraphs_model_and_the_three_refused_answers(
    admin_client, agent, handbook, knowledge_folder
):
    broken = make_built(
        agent, knowledge_folder, "mixed", {"ok.md": HANDBOOK["leave.md"], "broken.pdf": b"%PDF-1 junk"}
    )
    unrecorded = create_collection(agent=agent, name="legacy")
    CollectionBuilt.objects.create(
        collection=unrecorded,
        agent_id="alpha",
        model="hash-64",
        dimensions=64,
        method="fixed",
        passages=3,
        built_at=timezone.now(),
        refused=None,
    )
    create_collection(agent=agent, name="fresh")
    body = admin_client.get(url("collection_changelist")).content.decode()
    assert '<span class="rs-refused-empty">nothing refused</span>' in body  # handbook
    assert '<span class="rs-refused-names">broken.pdf</span>' in body  # mixed
    assert "not recorded</span>" in body  # legacy: a row that never said
    assert body.count("never built") >= 2  # fresh: no build status and no build record
    assert "rs-status-succeeded" in body and "hash-64 (64)" in body
    assert f">{handbook.built.passages}<" in body and f">{broken.built.passages}<" in body


def test_the_changelist_shows_the_last_builds_warnings(admin_client, agent, knowledge_folder):
    collection = make_built(
        agent, knowledge_folder, "readers", {"a.md": HANDBOOK["leave.md"]}, per_reader=True
    )
    body = admin_client.get(url("collection_changelist")).content.decode()
    assert "paragraphs have no label, so any reader may read them" in body
    assert collection.runs.first().warnings


def test_only_available_chunking_strategies_are_offered(admin_client, handbook):
    body = admin_client.get(url("collection_change", handbook.pk)).content.decode()
    assert '<option value="fixed" selected>' in body and '<option value="window">' in body
    assert 'value="semantic"' not in body


def test_the_rebuild_button_requests_a_build_through_the_service(admin_client, handbook, run_on_commit):
    with run_on_commit(execute=True):
        response = admin_client.post(url("collection_rebuild", handbook.pk))
    assert response.status_code == 302 and response["Location"] == url("collection_change", handbook.pk)
    run = handbook.runs.first()
    assert handbook.runs.count() == 2 and run.status == BuildRun.SUCCEEDED  # django-q is synchronous in tests
    assert run.requested_by == "admin:admin"
    assert any("Build 2 of handbook requested" in m for m in texts(response))


def test_build_numbers_count_each_collections_own_builds(admin_client, agent, knowledge_folder, handbook):
    """The first build of a second collection is its build 1, whatever ids other collections used."""
    other = make_built(agent, knowledge_folder, "other", {"a.md": "# A\n\nSome text about apples.\n"})
    first = other.runs.get()
    assert first.number == 1 and first.pk > 1 and handbook.runs.get().number == 1
    history = admin_client.get(url("collection_change", other.pk)).content.decode()
    assert f'href="{url("buildrun_change", first.pk)}">1</a>' in history
    assert "<h2>Latest build (1)</h2>" in history  # the banner names it as the history does, not by id


def test_a_running_build_makes_rebuild_a_clear_message_not_an_error(admin_client, handbook):
    running = BuildRun.objects.create(
        collection=handbook, status=BuildRun.RUNNING, heartbeat_at=timezone.now(), number=7
    )
    response = admin_client.post(url("collection_rebuild", handbook.pk), follow=True)
    assert response.status_code == 200
    assert any(f"already running (build 7, id {running.pk})" in m for m in texts(response))
    assert handbook.runs.count() == 2
    response = admin_client.post(
        url("collection_changelist"),
        {"action": "rebuild_selected", "_selected_action": [handbook.pk]},
        follow=True,
    )
    assert any("already running" in m for m in texts(response))


def test_the_bulk_action_rebuilds_every_selected_collection(
    admin_client, agent, handbook, knowledge_folder, run_on_commit
):
    other = make_built(agent, knowledge_folder, "other", {"x.md": HANDBOOK["travel.md"]})
    with run_on_commit(execute=True):
        response = admin_client.post(
            url("collection_changelist"),
            {"action": "rebuild_selected", "_selected_action": [handbook.pk, other.pk]},
        )
    assert response.status_code == 302
    assert handbook.runs.count() == other.runs.count() == 2
    assert {r.status for r in BuildRun.objects.all()} == {BuildRun.SUCCEEDED}


def test_the_progress_endpoint_reports_the_latest_build(admin_client, agent, handbook):
    done = admin_client.get(url("collection_progress", handbook.pk))
    assert done["Content-Type"] == "application/json" and "no-store" in done["Cache-Control"]
    body = done.json()
    assert (body["status"], body["percent"], body["active"]) == ("succeeded", 100, False)
    assert body["passages"] == handbook.built.passages and "paragraphs" in body["detail"]

    running = BuildRun.objects.create(
        collection=handbook,
        status=BuildRun.RUNNING,
        documents_total=3,
        documents_done=3,
        paragraphs_total=7,
        paragraphs_done=2,
        heartbeat_at=timezone.now(),
    )
    body = admin_client.get(url("collection_progress", handbook.pk)).json()
    # Reading documents is the first half of the bar, embedding the second: 50 + 50 * 2/7.
    assert (body["build"], body["status"], body["percent"], body["active"]) == (
        running.pk,
        "running",
        64,
        True,
    )
    assert body["detail"].startswith("3 of 3 documents read, 2 of 7 paragraphs embedded")
    assert body["phase"] == "embedding paragraphs"
    # An estimate once embedding has moved; none while its first batch is out.
    BuildRun.objects.filter(pk=running.pk).update(started_at=timezone.now() - timezone.timedelta(seconds=64))
    body = admin_client.get(url("collection_progress", handbook.pk)).json()
    # 64 s for 64 %: about 36 s for the other 36 % (a second or so more if this test runs slowly).
    assert 36 <= body["eta_seconds"] <= 38 and body["detail"].endswith(
        f"; about {body['eta_seconds']} seconds left"
    )
    BuildRun.objects.filter(pk=running.pk).update(paragraphs_done=0)
    assert admin_client.get(url("collection_progress", handbook.pk)).json()["eta_seconds"] is None
    older = handbook.runs.exclude(pk=running.pk).get()
    assert (
        admin_client.get(url("collection_progress", handbook.pk, query=f"build={older.pk}")).json()["percent"]
        == 100
    )
    assert admin_client.get(url("collection_progress", handbook.pk, query="build=x")).status_code == 404

    fresh = create_collection(agent=agent, name="fresh")
    body = admin_client.get(url("collection_progress", fresh.pk)).json()
    assert (body["status"], body["percent"], body["active"]) == ("never built", 0, False)


def test_the_bar_never_goes_backwards_as_a_build_moves_from_reading_to_embedding(handbook):
    run = BuildRun(collection=handbook, status=BuildRun.RUNNING, documents_total=4)
    seen = []
    for done in range(5):
        run.documents_done = done
        seen.append(run.percent)
    run.paragraphs_total = 10
    for done in range(11):
        run.paragraphs_done = done
        seen.append(run.percent)
    run.status = BuildRun.SUCCEEDED
    seen.append(run.percent)
    assert seen == sorted(seen) and seen[0] == 0 and seen[4] == 50 and seen[-1] == 100


def test_the_change_page_shows_the_bar_the_history_and_the_source_by_variable(admin_client, handbook):
    build_collection(collection=handbook)
    body = admin_client.get(url("collection_change", handbook.pk)).content.decode()
    assert 'role="progressbar"' in body and 'aria-valuenow="100"' in body and 'data-active="false"' in body
    assert f'data-url="{url("collection_progress", handbook.pk)}"' in body
    assert body.count("rs-status-succeeded") >= 2  # the bar's badge and the history rows
    assert "KNOWLEDGE_ALPHA__HANDBOOK_FOLDER and 0 uploaded documents" in body
    for run in handbook.runs.all():
        assert url("buildrun_change", run.pk) in body


def test_the_add_page_offers_each_agents_folders_and_refuses_another_agents(
    admin_client, agent, knowledge_root
):
    from collections_app.services.agents import create_agent

    other, _ = create_agent(agent_id="other")
    knowledge_root("alpha", "hr-share", {"a.md": "# A\n\nText.\n"})
    knowledge_root("other", "payroll", {"b.md": "# B\n\nText.\n"})
    body = admin_client.get(url("collection_add")).content.decode()
    assert '<optgroup label="alpha">' in body and '<option value="hr-share">' in body
    assert '<optgroup label="other">' in body and '<option value="payroll">' in body
    form = {"agent": agent.pk, "name": "stolen", "folder": "payroll", "method": "structure", "built_from": ""}
    refused = admin_client.post(url("collection_add"), form).content.decode()
    assert "agent &quot;alpha&quot; has no folder &quot;payroll&quot;" in refused
    assert not Collection.objects.filter(name="stolen").exists()
    admin_client.post(url("collection_add"), {**form, "name": "mine", "folder": "hr-share"})
    mine = Collection.objects.get(name="mine")
    assert mine.folder == "hr-share"
    page = admin_client.get(url("collection_change", mine.pk)).content.decode()
    assert "payroll" not in page  # once made, only its own agent's folders are offered
    assert "folder &quot;hr-share&quot; under KNOWLEDGE_ROOT" in page


def test_a_build_nobody_picks_up_says_no_task_worker_is_running(
    admin_client, agent, knowledge_root, settings
):
    from collections_app.services.builds import request_build

    settings.BUILD_STALE_SECONDS = 60
    knowledge_root("alpha", "hr-share", {"a.md": "# A\n\nText.\n"})
    collection = create_collection(agent=agent, name="waiting", folder="hr-share")
    run = request_build(collection=collection, enqueue=False)
    page = admin_client.get(url("collection_change", collection.pk)).content.decode()
    assert "no task worker is running" not in page
    BuildRun.objects.filter(pk=run.pk).update(created_at=timezone.now() - timedelta(seconds=61))
    page = admin_client.get(url("collection_change", collection.pk)).content.decode()
    assert "no task worker is running" in page and "manage.py qcluster" in page
    progress = admin_client.get(url("collection_progress", collection.pk)).json()
    assert progress["waiting"].startswith("no task worker is running")


# --- Documents --------------------------------------------------------------------------


def test_approve_documents_makes_needs_review_active_and_leaves_others_alone(
    conflicting, handbook, admin_user
):
    # A conflict holds the two conflicting paragraphs; their documents wait for review for them.
    waiting = list(conflicting.documents.filter(review_paragraphs=True))
    assert len(waiting) == 2 and all(d.conflicts for d in waiting)
    active = handbook.documents.first()
    approved = approve_documents([*waiting, active], by=admin_user)
    assert sorted(d.name for d in approved) == ["policy-2023.md", "policy-2024.md"]
    for document in conflicting.documents.all():
        assert document.status == Document.ACTIVE and document.approved_fingerprint == document.fingerprint
    active.refresh_from_db()
    assert active.approved_fingerprint == ""
    # A rebuild of the same bytes keeps the approval.
    build_collection(collection=conflicting)
    assert set(conflicting.documents.values_list("status", flat=True)) == {Document.ACTIVE}


def test_documents_filter_by_status_and_show_warnings_and_conflicts(admin_client, conflicting, handbook):
    body = admin_client.get(url("document_changelist", query="waiting=1")).content.decode()
    assert "policy-2023.md" in body and "policy-2024.md" in body and "leave.md" not in body
    assert "except for its numbers" in body and "rs-status-needs-review" in body
    body = admin_client.get(url("document_changelist", query="status__exact=needs_review")).content.decode()
    assert "policy-2023.md" not in body  # waiting for some paragraphs, not wholly
    body = admin_client.get(url("document_changelist", query="status__exact=active")).content.decode()
    assert "leave.md" in body and "policy-2023.md" in body


def test_the_side_by_side_view_says_when_the_other_paragraph_waits_too(admin_client, conflicting, admin_user):
    """On a first build both sides of a conflict wait: the other document is not shown as plainly searched."""
    older, newer = conflicting.documents.order_by("name")
    side = admin_client.get(url("document_change", older.pk)).content.decode()
    assert "policy-2024.md</a> (active, some paragraphs in review)</th>" in side
    assert side.count('data-role="theirs-waits"') == 1
    approve_documents([newer], by=admin_user)
    side = admin_client.get(url("document_change", older.pk)).content.decode()
    assert "policy-2024.md</a> (active)</th>" in side and 'data-role="theirs-waits"' not in side


def test_the_approve_action_and_button_go_through_the_service(admin_client, conflicting):
    first, second = conflicting.documents.order_by("name")
    response = admin_client.post(
        url("document_changelist"), {"action": "approve", "_selected_action": [first.pk]}
    )
    assert response.status_code == 302 and any(
        "Approved 1 document: policy-2023.md" in m for m in texts(response)
    )
    first.refresh_from_db()
    assert first.status == Document.ACTIVE and first.approved_fingerprint == first.fingerprint

    page = admin_client.get(url("document_change", second.pk)).content.decode()
    assert url("document_approve", second.pk) in page
    assert admin_client.get(url("document_approve", second.pk)).status_code == 405
    admin_client.post(url("document_approve", second.pk))
    second.refresh_from_db()
    assert second.status == Document.ACTIVE
    assert (
        url("document_approve", second.pk)
        not in admin_client.get(url("document_change", second.pk)).content.decode()
    )


def test_approved_documents_are_searched(admin_client, conflicting, agent, run_on_commit):
    """The first build was refused (both in review), so approving in the admin queues the build that
    puts the approved document live; after that, an approval is searched at once."""
    from collections_app.services.search import search_collection

    def found():
        answer = search_collection(
            agent=agent, collection=conflicting, question="carry-over annual leave", min_score=0
        )
        return {p["document"] for p in answer["paragraphs"]}

    newer = conflicting.documents.get(name="policy-2024.md")
    with run_on_commit(execute=True):
        page = admin_client.post(url("document_approve", newer.pk), follow=True)
    assert "policies&quot; was never built: a build was queued" in page.content.decode()
    assert found() == {"policy-2024.md"}
    approve_documents(conflicting.documents.filter(name="policy-2023.md"))
    assert found() == {"policy-2023.md", "policy-2024.md"}


def test_default_labels_are_editable_and_apply_to_the_documents_paragraphs(admin_client, handbook):
    leave = handbook.documents.get(name="leave.md")
    hr, staff = Label.objects.create(name="hr"), Label.objects.create(name="staff")
    response = admin_client.post(url("document_change", leave.pk), {"default_labels": [hr.pk, staff.pk]})
    assert response.status_code == 302
    assert set(leave.default_labels.values_list("name", flat=True)) == {"hr", "staff"}
    for paragraph in leave.paragraphs.all():
        assert set(paragraph.labels.values_list("name", flat=True)) == {"hr", "staff"}
    admin_client.post(url("document_change", leave.pk), {"default_labels": [hr.pk]})
    for paragraph in leave.paragraphs.all():
        assert set(paragraph.labels.values_list("name", flat=True)) == {"hr"}
    assert (
        not Paragraph.objects.filter(collection=handbook, labels__isnull=False)
        .exclude(document=leave)
        .exists()
    )
    # ...and the build carries them forward to a rebuilt document.
    assert set_default_labels(document=leave, labels=[hr]) == (0, 0)


def test_the_upload_field_is_never_shown(admin_client, handbook):
    document = upload_document(collection=handbook, name="notes.txt", content=b"Notes about parking spaces.")
    body = admin_client.get(url("document_change", document.pk)).content.decode()
    assert "notes.txt" in body and 'name="upload"' not in body and document.upload.name not in body
    assert "not built yet" in body
