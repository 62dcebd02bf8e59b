"""Review: approvals record who and when; conflicts name the other document and show both paragraphs."""

import pytest

from collections_app.models import Document
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.review import (
    approval_warnings,
    approve_documents,
    conflicting_documents,
    conflicting_paragraphs,
)

pytestmark = pytest.mark.django_db

OLD = "# Overtime\n\nOvertime hours are paid at 150 % of the hourly rate for all staff.\n"
NEW = "# Overtime\n\nOvertime hours are paid at 125 % of the hourly rate for all staff.\n"


@pytest.fixture
def pair(agent, knowledge_folder, django_user_model):
    collection = create_collection(agent=agent, name="hr")
    knowledge_folder(
        "hr", {"overtime-2024.md": OLD, "overtime-2025.md": NEW, "leave.md": "# Leave\n\nTake it.\n"}
    )
    build_collection(collection=collection)
    return collection


def test_a_conflict_names_the_other_document_and_the_two_paragraphs_side_by_side(pair):
    old, new = pair.documents.get(name="overtime-2024.md"), pair.documents.get(name="overtime-2025.md")
    # Neither was answering before (a first build): both conflicting paragraphs wait, nothing else does.
    assert old.status == new.status == Document.ACTIVE and old.review_paragraphs and new.review_paragraphs
    assert old.paragraphs.get().in_review and new.paragraphs.get().in_review
    assert conflicting_documents(old) == [new]
    [side] = conflicting_paragraphs(old, new)
    assert "150 %" in side.mine and "125 %" in side.theirs and side.other == new


def test_approving_one_half_of_a_pair_warns_about_the_other_once_it_is_searched(pair):
    old, new = pair.documents.get(name="overtime-2024.md"), pair.documents.get(name="overtime-2025.md")
    assert approval_warnings([old]) == []  # the other is still in review: nothing contradicts yet
    assert approval_warnings([old, new]) == [
        "overtime-2024.md conflicts with overtime-2025.md, which is approved with it: agents will get both "
        "answers"
    ]
    approve_documents([new], by="librarian")
    assert approval_warnings([old]) == [
        "overtime-2024.md conflicts with overtime-2025.md, which is already searched: agents will get both "
        "answers"
    ]


def test_an_approval_records_who_and_when(pair, django_user_model):
    user = django_user_model.objects.create_user("librarian")
    [approved] = approve_documents(pair.documents.filter(name="overtime-2025.md"), by=user)
    approved.refresh_from_db()
    assert approved.status == Document.ACTIVE
    assert approved.approved_by == "librarian" and approved.approved_at is not None


def test_repeats_inside_one_document_are_not_a_conflict(agent, knowledge_folder):
    """A man page repeating a sentence with other numbers held 94 paragraphs back, 'matching' itself."""
    collection = create_collection(agent=agent, name="man")
    page = "# socat\n\n" + "\n\n".join(
        f"Option {n}: the first connection times out after {n * 5} seconds here." for n in range(1, 5)
    )
    knowledge_folder("man", {"socat.md": page})
    run = build_collection(collection=collection)
    assert collection.documents.get().status == Document.ACTIVE and run.warnings == []


def test_an_approval_sticks_across_rebuilds_and_is_not_warned_about_again(pair):
    new = pair.documents.get(name="overtime-2025.md")
    approve_documents([new], by="librarian")
    run = build_collection(collection=pair)  # the same files
    new.refresh_from_db()
    assert new.status == Document.ACTIVE and new.approved_by == "librarian"
    assert [w for w in run.warnings if "review" in w] == [
        "overtime-2024.md: 1 paragraph waits in review, the rest answers: a paragraph matches one in "
        "overtime-2025.md except for its numbers"
    ]
    assert run.status == "succeeded_with_review" and run.documents_in_review == 1
    # The paragraphs of each side are named, to link to.
    [side] = conflicting_paragraphs(pair.documents.get(name="overtime-2024.md"), new)
    assert (side.mine_chunk_id, side.theirs_chunk_id) == ("overtime-2024.md#0", "overtime-2025.md#0")
    assert side.theirs_paragraph == new.paragraphs.get().pk


def test_the_build_status_counts_the_documents_left_in_review(agent_key, knowledge_folder, client):
    """An agent reading `succeeded_with_review` over the API learns how many documents wait without
    parsing the warnings (the count the webhook and the admin already give)."""
    agent, raw = agent_key
    collection = create_collection(agent=agent, name="hr")
    knowledge_folder(
        "hr",
        {"overtime-2024.md": OLD, "overtime-2025.md": NEW, "leave.md": "# Leave\n\nTake it.\n"},
        agent=agent.agent_id,
    )
    run = build_collection(collection=collection)
    answer = client.get(f"/api/v1/collections/hr/builds/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {raw}").json()
    assert (answer["status"], answer["documents_in_review"]) == ("succeeded_with_review", 2)
