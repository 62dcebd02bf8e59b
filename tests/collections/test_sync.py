"""Folder sync (issue 26): a cheap check of the folder, a build only when something changed."""

import os
from datetime import timedelta

import pytest
from django.utils import timezone

from collections_app.models import BuildRun, CollectionSync, KeptLabels, Label, Paragraph
from collections_app.services import known_answers, sync
from collections_app.services.agents import create_collection
from collections_app.services.builds import request_build
from collections_app.services.search import search_collection
from ragsite.errors import RagsiteError
from tests.conftest import HANDBOOK

pytestmark = pytest.mark.django_db


@pytest.fixture
def synced(agent, knowledge_folder):
    folder = knowledge_folder("handbook", HANDBOOK)
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    sync.set_sync(collection=collection, every=5)
    collection.folder_path = folder
    return collection


def texts(collection, question: str) -> str:
    answer = search_collection(
        agent=collection.agent, collection=collection, question=question, min_score=0, most=10
    )
    return " ".join(p["text"] for p in answer["paragraphs"])


def test_the_first_check_builds_and_an_unchanged_folder_is_not_built_again(synced, check):
    first = check(synced)
    assert first.never_built and first.build.status == BuildRun.SUCCEEDED
    assert "0.42 per kilometre" in texts(synced, "mileage per kilometre")
    again = check(synced)
    assert again.outcome == "unchanged" and again.build is None and again.fingerprinted == 0
    # A touched file (new mtime, same bytes) is read to fingerprint it, and still nothing is built.
    path = synced.folder_path / "leave.md"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5_000_000_000))
    touched = check(synced)
    assert touched.outcome == "unchanged" and touched.fingerprinted == 1
    assert BuildRun.objects.filter(collection=synced).count() == 1
    state = CollectionSync.objects.get(collection=synced)
    assert state.last_checked_at is not None and state.next_check_at > state.last_checked_at


def test_a_new_a_changed_and_a_deleted_file_land_in_one_build(synced, check):
    check(synced)
    folder = synced.folder_path
    (folder / "canteen.md").write_text("# Canteen\n\nThe canteen serves lunch from noon until two.\n")
    (folder / "travel.md").write_text("# Travel\n\nMileage is reimbursed at 0.55 per kilometre.\n")
    (folder / "security.md").unlink()
    found = check(synced)
    assert (found.new, found.changed, found.deleted) == (["canteen.md"], ["travel.md"], ["security.md"])
    assert found.build.status == BuildRun.SUCCEEDED and found.build.requested_by == "sync"
    assert "noon until two" in texts(synced, "when does the canteen serve lunch")
    mileage = texts(synced, "mileage per kilometre")
    assert "0.55 per kilometre" in mileage and "0.42" not in mileage
    assert not Paragraph.objects.filter(collection=synced, document__name="security.md").exists()
    assert "encryption" not in texts(synced, "laptops full-disk encryption")
    state = CollectionSync.objects.get(collection=synced)
    assert state.last_build_id == found.build.pk and "1 new, 1 changed, 1 deleted" in state.last_outcome
    assert state.last_changed_at == state.last_checked_at


def test_a_deleted_document_keeps_its_labels_for_its_return(synced, check):
    check(synced)
    hr, everyone = Label.objects.create(name="hr"), Label.objects.create(name="everyone")
    document = synced.documents.get(name="security.md")
    labelled = document.paragraphs.order_by("index").first()
    labelled.labels.add(hr)
    document.default_labels.add(everyone)
    text = (synced.folder_path / "security.md").read_text()
    (synced.folder_path / "security.md").unlink()
    gone = check(synced)
    assert gone.deleted == ["security.md"] and gone.build.status == BuildRun.SUCCEEDED
    assert not synced.documents.filter(name="security.md").exists()
    assert KeptLabels.objects.filter(collection=synced, name="security.md").exists()
    (synced.folder_path / "security.md").write_text(text)
    back = check(synced)
    assert back.new == ["security.md"] and back.build.status == BuildRun.SUCCEEDED
    returned = synced.documents.get(name="security.md")
    again = returned.paragraphs.get(fingerprint=labelled.fingerprint)
    assert set(again.labels.values_list("name", flat=True)) == {"hr", "everyone"}
    assert list(returned.default_labels.values_list("name", flat=True)) == ["everyone"]
    assert not KeptLabels.objects.filter(collection=synced).exists()  # used once, then gone


def test_a_refused_build_leaves_the_old_one_answering_and_the_same_state_is_not_built_again(
    synced, check, settings
):
    known_answers.set_known_answers(
        collection=synced,
        items=[{"question": "what is mileage reimbursed at per kilometre", "answer": "0.42 per kilometre"}],
    )
    check(synced)
    settings.KNOWN_ANSWERS_GATE = 0
    (synced.folder_path / "travel.md").write_text("# Travel\n\nTrains are booked in standard class.\n")
    refused = check(synced)
    assert refused.build.status == BuildRun.REFUSED
    assert "0.42 per kilometre" in texts(synced, "mileage per kilometre")  # the old build still answers
    quiet = check(synced)
    assert quiet.build is None and f"build {refused.build.pk} of this state refused" in quiet.outcome
    assert sync.describe(synced)["outcome"] == quiet.outcome
    # A further change is built again.
    (synced.folder_path / "travel.md").write_text(
        "# Travel\n\nMileage is reimbursed at 0.42 per kilometre.\n\nTrains are booked in first class.\n"
    )
    assert check(synced).build.status == BuildRun.SUCCEEDED


def test_a_check_while_a_build_is_queued_queues_no_second_one(synced, check):
    check(synced)
    waiting = request_build(collection=synced, requested_by="someone", enqueue=False)
    (synced.folder_path / "canteen.md").write_text("# Canteen\n\nLunch from noon.\n")
    found = check(synced)
    assert found.build is None and f"waiting for build {waiting.pk}" in found.outcome
    assert BuildRun.objects.filter(collection=synced).count() == 2


def test_the_sweep_claims_due_collections_once(
    synced, agent, knowledge_folder, django_capture_on_commit_callbacks
):
    knowledge_folder("other", {"a.md": "# A\n\nSome text here.\n"})
    other = create_collection(agent=agent, name="other", method="fixed", size=80)
    sync.set_sync(collection=other, every=60)
    CollectionSync.objects.filter(collection=other).update(
        next_check_at=timezone.now() + timedelta(minutes=30)
    )
    with django_capture_on_commit_callbacks(execute=True):
        claimed = sync.sweep_due()
    assert claimed == [synced.pk]
    assert BuildRun.objects.filter(collection=synced, status=BuildRun.SUCCEEDED).count() == 1  # the task ran
    assert not BuildRun.objects.filter(collection=other).exists()
    assert sync.sweep_due() == []  # claimed: the next check is a period away
    state = CollectionSync.objects.get(collection=synced)
    assert timedelta(minutes=4) < state.next_check_at - timezone.now() <= timedelta(minutes=5)


@pytest.mark.parametrize("every", [0, -1, 10081, 2.5, True, "5"])
def test_a_sync_period_out_of_range_is_refused(synced, every):
    with pytest.raises(RagsiteError) as refused:
        sync.set_sync(collection=synced, every=every)
    assert refused.value.code == "invalid_sync_every"


def test_stopping_sync_keeps_the_period_and_hides_the_fields(synced):
    sync.set_sync(collection=synced, every=None)
    assert sync.describe(synced) is None
    assert CollectionSync.objects.get(collection=synced).every == 5
    assert sync.sweep_due() == []
