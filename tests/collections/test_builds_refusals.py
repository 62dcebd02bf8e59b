"""Builds that must not replace a working collection (seed 000 refusal 3), seed 003's cap, and what
a build records of the documents it refused."""

# ruff: noqa: F811  (the fixture `handbook` comes from test_builds, requested by name)

import json
import logging

import pytest

from collections_app.models import BuildRun, CollectionBuilt, Document, Paragraph
from collections_app.services.builds import EmptyBuild, build_collection
from ragsite.errors import Conflict

from .test_builds import LEAVE, SECURITY, handbook  # noqa: F401

pytestmark = pytest.mark.django_db


# --- seed 000 refusal 3 and seed 003's cap ------------------------------------------------------


def searchable_texts(collection) -> set[str]:
    return set(Paragraph.objects.searchable(collection).values_list("text", flat=True))


def test_seed_refusal_3_an_all_duplicate_folder_does_not_replace_a_working_collection(
    handbook, knowledge_folder
):
    """Seed 000, refusal 3: the guard counts the paragraphs search would read, not rows written; two
    identical files both go to review, so their build would answer nothing and is refused."""
    folder = knowledge_folder("handbook", {"leave.md": LEAVE})
    build_collection(collection=handbook)
    before = searchable_texts(handbook)
    (folder / "leave.md").unlink()
    (folder / "a.md").write_text(SECURITY)
    (folder / "copy-of-a.md").write_text(SECURITY)
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.REFUSED
    assert "nothing readers could search" in run.error and "a.md, copy-of-a.md" in run.error
    assert any("a.md needs review: exact duplicate of copy-of-a.md" in w for w in run.warnings)
    assert searchable_texts(handbook) == before
    from collections_app.services.search import search_collection

    answer = search_collection(agent=handbook.agent, collection=handbook, question="carry-over five days")
    assert answer["paragraphs"] and answer["paragraphs"][0]["document"] == "leave.md"


def test_seed_refusal_3_a_folder_whose_only_document_went_to_review_does_not_replace_a_working_collection(
    handbook, knowledge_folder
):
    from collections_app.samples import pdf_bytes

    folder = knowledge_folder("handbook", {"leave.md": LEAVE})
    build_collection(collection=handbook)
    (folder / "leave.md").unlink()
    (folder / "scan.pdf").write_bytes(pdf_bytes([[("p", "Carry-over is capped at ten days.")], []]))
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.REFUSED and "(scan.pdf)" in run.error
    assert "scan.pdf needs review: page 2 has no text layer, and OCR read nothing on it" in run.warnings
    assert any("five days" in text for text in searchable_texts(handbook))


def test_seed_refusal_3_the_store_refuses_to_replace_a_searchable_collection_with_unsearchable_rows(
    handbook, knowledge_folder
):
    knowledge_folder("handbook", {"leave.md": LEAVE})
    build_collection(collection=handbook)
    Document.objects.filter(collection=handbook).update(status=Document.NEEDS_REVIEW)
    with pytest.raises(EmptyBuild, match="no search reads"):
        Paragraph.objects.guard_not_empty(handbook)
    Paragraph.objects.guard_not_empty(handbook, was_searchable=False)  # nothing searchable was replaced


def test_a_first_build_whose_documents_all_need_review_is_refused_and_kept_for_a_person_to_review(
    handbook, knowledge_folder
):
    """Seed 000: a build that would leave the collection nothing to answer from is refused, so searches
    say "never built" instead of answering [] to everything. Its documents are kept, held for review, so
    a person can approve them; the next build then goes live."""
    from collections_app.services.review import approve_documents
    from collections_app.services.search import search_collection

    knowledge_folder("handbook", {"a.md": LEAVE, "b.md": LEAVE})
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.REFUSED
    assert "every document needs review (a.md, b.md)" in run.error and "approve them" in run.error
    assert not CollectionBuilt.objects.filter(collection=handbook).exists()
    assert set(handbook.documents.values_list("status", flat=True)) == {Document.NEEDS_REVIEW}
    with pytest.raises(Conflict) as unbuilt:
        search_collection(agent=handbook.agent, collection=handbook, question="carry-over five days")
    assert unbuilt.value.code == "not_built"

    approve_documents(handbook.documents.all())
    assert build_collection(collection=handbook).status == BuildRun.SUCCEEDED
    answer = search_collection(agent=handbook.agent, collection=handbook, question="carry-over five days")
    assert answer["paragraphs"] and "five days" in answer["paragraphs"][0]["text"]


def test_seed_000_refused_an_empty_build_keeps_the_names_it_knew_on_its_run(handbook, knowledge_folder):
    """Seed 000: refused says what the build could not read, by name, also when the whole build is refused."""
    folder = knowledge_folder("handbook", {"leave.md": LEAVE})
    build_collection(collection=handbook)
    (folder / "leave.md").unlink()
    (folder / "broken.pdf").write_bytes(b"garbage")
    (folder / "notes.xyz").write_text("an unsupported type")
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.REFUSED
    run.refresh_from_db()
    assert run.refused == ["broken.pdf", "notes.xyz"] and run.documents_refused == 2
    assert CollectionBuilt.objects.get(collection=handbook).refused == []  # the record is the last build's


def test_seed_003_a_source_over_240_paragraphs_keeps_its_first_240_and_stays_searchable(
    handbook, knowledge_folder
):
    """Seed 003: "At most 240 passages are kept per source. A document that needs more is a document that
    should be several sources" - the rest is dropped with a warning that does not hold the document back."""
    from collections_app.text.chunking import MAX_PARAGRAPHS_PER_DOCUMENT

    def word(n: int) -> str:  # numbers would make the clauses "differ only in their numbers", a conflict
        return "".join("abcdefghij"[int(digit)] for digit in f"{n:03d}")

    big = "".join(f"# Part {word(n)}\n\nClause {word(n)} of the long policy applies.\n\n" for n in range(300))
    knowledge_folder("handbook", {"big.md": big, "leave.md": LEAVE})
    run = build_collection(collection=handbook)
    assert run.status == BuildRun.SUCCEEDED
    document = handbook.documents.get(name="big.md")
    assert document.status == Document.ACTIVE and document.scan_warnings == []
    assert document.paragraph_count == MAX_PARAGRAPHS_PER_DOCUMENT
    assert (
        "big.md: only the first 240 of 300 paragraphs were kept; a document that needs more is a document "
        "that should be several sources"
    ) in run.warnings
    from collections_app.services.search import search_collection

    answer = search_collection(
        agent=handbook.agent, collection=handbook, question=f"clause {word(239)}", around=0
    )
    assert answer["paragraphs"][0]["chunk_id"] == "big.md#239"
    dropped = search_collection(
        agent=handbook.agent, collection=handbook, question=f"clause {word(299)}", around=0
    )
    assert all(f"Clause {word(299)} " not in p["text"] for p in dropped["paragraphs"])
    assert not Paragraph.objects.filter(collection=handbook, text__contains=f"Clause {word(240)} ").exists()


def test_each_refused_document_records_a_category_and_the_names_stay_names_only(
    handbook, knowledge_folder, caplog
):
    from collections_app.samples import pdf_bytes

    knowledge_folder(
        "handbook",
        {
            "leave.md": LEAVE,
            "broken.pdf": b"%PDF-1.4 not really",
            "notes.xyz": "x",
            "scan.pdf": pdf_bytes([[], []]),
            "blank.md": "  \n",
        },
    )
    with caplog.at_level(logging.WARNING):
        run = build_collection(collection=handbook)
    expected = {
        "broken.pdf": "corrupt",
        "notes.xyz": "unsupported type",
        "scan.pdf": "no text layer — scanned?",
        "blank.md": "empty",
    }
    assert run.refusal_reasons == expected
    assert dict(handbook.documents.filter(status=Document.REFUSED).values_list("name", "refusal")) == expected
    # seed 000: the build record and the run's `refused` are names, never reasons.
    assert (
        sorted(CollectionBuilt.objects.get(collection=handbook).refused)
        == sorted(expected)
        == sorted(run.refused)
    )
    # Every refusal's category is in the build's warnings (docs/security.md), by name; the detail
    # stays in the server log.
    for name, category in expected.items():
        assert f"{name} was refused ({category})" in run.warnings, run.warnings
    assert "not a readable PDF" in caplog.text
    assert "not a readable PDF" not in json.dumps(list(Document.objects.values()), default=str)
    assert "not a readable PDF" not in json.dumps(run.warnings)
    assert handbook.documents.get(name="leave.md").refusal == ""


def test_a_document_that_becomes_readable_loses_its_refusal(handbook, knowledge_folder):
    folder = knowledge_folder("handbook", {"leave.md": LEAVE, "late.md": ""})
    build_collection(collection=handbook)
    assert handbook.documents.get(name="late.md").refusal == "empty"
    (folder / "late.md").write_text(SECURITY)
    build_collection(collection=handbook)
    late = handbook.documents.get(name="late.md")
    assert (late.status, late.refusal) == (Document.ACTIVE, "")


def test_a_disabled_paragraph_stays_disabled_across_rebuilds_by_its_text(handbook, knowledge_folder):
    folder = knowledge_folder("handbook", {"leave.md": LEAVE})
    build_collection(collection=handbook)
    Paragraph.objects.filter(collection=handbook, text__contains="Receipts").update(enabled=False)
    (folder / "leave.md").write_text(LEAVE.replace("five days", "six days"))  # the document changes
    build_collection(collection=handbook)
    assert not Paragraph.objects.get(collection=handbook, text__contains="Receipts").enabled
    assert Paragraph.objects.get(collection=handbook, text__contains="six days").enabled


def test_a_build_clears_the_rebuild_needed_note(handbook, knowledge_folder):
    knowledge_folder("handbook", {"leave.md": LEAVE})
    handbook.rebuild_needed = "x.md was deleted"
    handbook.save()
    build_collection(collection=handbook)
    handbook.refresh_from_db()
    assert handbook.rebuild_needed == ""
