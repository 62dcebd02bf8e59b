"""Enabling, disabling and deleting documents and paragraphs, seen through search as an agent sees it."""

import pytest

from collections_app.errors import EmptyBuild
from collections_app.models import (
    BuildRun,
    Collection,
    CollectionBuilt,
    Document,
    MeasureRun,
    Paragraph,
)
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.documents import (
    delete_collection,
    delete_document,
    deletion_summary,
    searchable_paragraphs,
    set_documents_enabled,
    set_paragraphs_enabled,
)
from collections_app.services.search import search_collection
from collections_app.services.uploads import upload_document

pytestmark = pytest.mark.django_db


def texts(agent, question, **kwargs):
    answer = search_collection(
        agent=agent, collection="handbook", question=question, min_score=0, most=50, **kwargs
    )
    return " ".join(p["text"] for p in answer["paragraphs"])


def test_a_disabled_paragraph_is_never_searched(agent, handbook):
    assert "five days" in texts(agent, "carry-over annual leave five days", around=0)
    changed = set_paragraphs_enabled(
        paragraphs=Paragraph.objects.filter(text__contains="five days"), enabled=False
    )
    assert changed == 1
    assert "five days" not in texts(agent, "carry-over annual leave five days", around=0)
    set_paragraphs_enabled(paragraphs=Paragraph.objects.filter(text__contains="five days"), enabled=True)
    assert "five days" in texts(agent, "carry-over annual leave five days", around=0)


def test_a_disabled_paragraph_is_never_stitched_in_as_a_neighbour(agent, handbook):
    wide = texts(agent, "Unused days beyond five lapse on the first of April", around=5)
    assert "capped at five days" in wide and "line manager" in wide
    set_paragraphs_enabled(paragraphs=Paragraph.objects.filter(text__contains="capped at"), enabled=False)
    wide = texts(agent, "Unused days beyond five lapse on the first of April", around=5)
    assert "lapse" in wide and "capped at" not in wide


def test_a_disabled_document_is_never_searched_and_its_paragraphs_keep_their_own_marks(agent, handbook):
    travel = handbook.documents.get(name="travel.md")
    set_documents_enabled(documents=[travel], enabled=False)
    assert "Mileage" not in texts(agent, "mileage reimbursed per kilometre")
    assert Paragraph.objects.filter(document=travel, enabled=True).exists()
    set_documents_enabled(documents=[travel], enabled=True)
    assert "Mileage" in texts(agent, "mileage reimbursed per kilometre")


def test_a_disabled_document_stays_disabled_across_rebuilds(agent, handbook):
    set_documents_enabled(documents=handbook.documents.filter(name="travel.md"), enabled=False)
    build_collection(collection=handbook)
    assert not handbook.documents.get(name="travel.md").enabled
    assert "Mileage" not in texts(agent, "mileage reimbursed per kilometre")


def test_searchable_paragraphs_leave_out_disabled_and_in_review(handbook):
    total = Paragraph.objects.filter(collection=handbook).count()
    assert searchable_paragraphs(handbook) == total
    set_paragraphs_enabled(
        paragraphs=Paragraph.objects.filter(text__contains="Badges are worn"), enabled=False
    )
    Document.objects.filter(collection=handbook, name="travel.md").update(status=Document.NEEDS_REVIEW)
    travel = Paragraph.objects.filter(document__name="travel.md").count()
    assert searchable_paragraphs(handbook) == total - 1 - travel


def test_deleting_a_document_takes_its_paragraphs_out_of_search_at_once(agent, handbook):
    assert "Mileage" in texts(agent, "mileage reimbursed per kilometre")  # the index is now cached
    delete_document(document=handbook.documents.get(name="travel.md"), by="librarian")
    assert not Paragraph.objects.filter(document__name="travel.md").exists()
    assert "Mileage" not in texts(agent, "mileage reimbursed per kilometre")
    handbook.refresh_from_db()
    assert "travel.md was deleted" in handbook.rebuild_needed
    assert (
        CollectionBuilt.objects.get(collection=handbook).passages
        == Paragraph.objects.filter(collection=handbook).count()
    )


def test_the_last_document_of_a_built_collection_cannot_be_deleted(agent, handbook):
    delete_document(document=handbook.documents.get(name="travel.md"))
    delete_document(document=handbook.documents.get(name="security.md"))
    with pytest.raises(EmptyBuild):
        delete_document(document=handbook.documents.get(name="leave.md"))
    assert handbook.documents.filter(name="leave.md").exists()
    assert "five days" in texts(agent, "carry-over annual leave five days")


def test_a_document_of_an_unbuilt_collection_can_always_be_deleted(agent):
    collection = create_collection(agent=agent, name="drafts")
    document = upload_document(collection=collection, name="a.md", content=b"# A\n\ntext\n")
    stored = document.upload.name
    storage = document.upload.storage
    delete_document(document=document)
    assert not collection.documents.exists() and not storage.exists(stored)


def test_deleting_a_collection_takes_everything_and_the_summary_counts_it_first(handbook):
    MeasureRun.objects.create(collection=handbook)
    summary = deletion_summary(collections=[handbook])
    assert summary == {
        "collections": 1,
        "documents": 3,
        "uploads": 0,
        "paragraphs": Paragraph.objects.filter(collection=handbook).count(),
        "measure_runs": 1,
    }
    delete_collection(collection=handbook, by="librarian")
    assert not Collection.objects.filter(pk=handbook.pk).exists()
    assert not Paragraph.objects.exists() and not Document.objects.exists() and not BuildRun.objects.exists()


def test_deleting_the_last_searchable_document_is_refused_but_one_in_review_may_go(agent, handbook):
    Document.objects.filter(collection=handbook, name__in=["security.md", "travel.md"]).update(
        status=Document.NEEDS_REVIEW
    )
    with pytest.raises(EmptyBuild, match="no search reads"):
        delete_document(document=handbook.documents.get(name="leave.md"))
    Document.objects.filter(collection=handbook, name="leave.md").update(status=Document.NEEDS_REVIEW)
    delete_document(document=handbook.documents.get(name="travel.md"))  # nothing answered before either
    assert sorted(handbook.documents.values_list("name", flat=True)) == ["leave.md", "security.md"]
