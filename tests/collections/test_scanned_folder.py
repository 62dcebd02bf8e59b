"""A librarian's folder: a scanned PDF, a mixed PDF, a PDF with an outline and a photo of a page, built end
to end. Every document is read (OCR where there is no text layer), every paragraph knows its pages and
sections, the export carries the pages, and where Tesseract is missing a scan is refused with a reason."""

import io
import json

import pytest

from collections_app import interchange as fmt
from collections_app.models import BuildRun, Document, Paragraph
from collections_app.samples import pdf_bytes, scanned_pdf_bytes, with_outline
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from collections_app.services.interchange import export_index, import_index

pytestmark = pytest.mark.django_db

SCANNED = [
    [("h", "Parking"), ("p", "Staff park in the north car park; visitors use the spaces by reception.")],
    [("h", "Bicycles"), ("p", "The bicycle shed behind the canteen is locked at eight in the evening.")],
]
MIXED = [
    [("h", "Canteen"), ("p", "The canteen serves lunch from noon until two every weekday.")],
    [("h", "Library"), ("p", "Borrowed books go back to the library within three weeks.")],
    [("h", "Post"), ("p", "Outgoing post leaves the mail room at four in the afternoon.")],
]
OUTLINED = [
    [("p", "Working hours"), ("p", "Core hours run from ten in the morning until three.")],
    [("p", "Remote work"), ("p", "Remote work needs a signed agreement with your manager.")],
]


def photo_of(pdf: bytes) -> bytes:
    import pypdfium2

    buffer = io.BytesIO()
    pypdfium2.PdfDocument(pdf)[0].render(scale=300 / 72, grayscale=True).to_pil().save(buffer, format="PNG")
    return buffer.getvalue()


@pytest.fixture
def folder_files():
    return {
        "scan.pdf": scanned_pdf_bytes(pdf_bytes(SCANNED)),
        "mixed.pdf": scanned_pdf_bytes(pdf_bytes(MIXED), pages=[2]),
        "outlined.pdf": with_outline(pdf_bytes(OUTLINED), [("Working hours", 1, 0), ("Remote work", 2, 0)]),
        "notice.png": photo_of(
            pdf_bytes([[("p", "Fire drills take place on the first Monday of each month.")]])
        ),
        "notes.md": "# Notes\n\nThe office is closed on public holidays.",
    }


def paragraph_with(collection, words: str) -> Paragraph:
    return Paragraph.objects.get(collection=collection, text__contains=words)


def test_every_document_of_the_folder_is_read_with_pages_sections_and_ocr_counted(
    agent, knowledge_folder, folder_files
):
    knowledge_folder("office", folder_files)
    collection = create_collection(agent=agent, name="office", method="structure")
    run = build_collection(collection=collection)

    assert run.status == BuildRun.SUCCEEDED, run.error
    assert run.refused == [] and run.documents_read == 5
    assert run.ocr_pages == 4  # two scanned pages, one page of the mixed PDF, the photo
    ocr = dict(Document.objects.filter(collection=collection).values_list("name", "ocr_pages"))
    assert ocr == {"scan.pdf": 2, "mixed.pdf": 1, "outlined.pdf": 0, "notice.png": 1, "notes.md": 0}
    assert set(Document.objects.filter(collection=collection).values_list("status", flat=True)) == {"active"}

    # OCR marks no headings: the scan's two short pages are packed into one paragraph.
    bicycles = paragraph_with(collection, "bicycle shed")
    assert (bicycles.page_first, bicycles.page_last) == (1, 2) and "north car park" in bicycles.text
    post = paragraph_with(collection, "mail room")
    assert (post.page_first, post.page_last, post.section) == (3, 3, "Post")  # a text page after the scan
    library = paragraph_with(
        collection, "three weeks"
    )  # on the OCR'd page of the mixed PDF, under page 1's heading
    assert (library.page_first, library.page_last, library.section) == (1, 2, "Canteen")
    remote = paragraph_with(collection, "signed agreement")
    assert (remote.page_first, remote.section) == (2, "Remote work")  # the outline names the section
    drill = paragraph_with(collection, "Fire drills")
    assert (drill.page_first, drill.page_last) == (1, 1)
    assert paragraph_with(collection, "public holidays").page_first is None  # Markdown has no pages


def test_a_paragraph_spanning_pages_carries_its_first_and_last(agent, knowledge_folder):
    pages = [
        [("p", "Every visitor signs the book at reception on arrival.")],
        [("p", "Visitors wear a badge that shows they are guests.")],
        [("p", "A member of staff walks each visitor out at the end of the visit.")],
    ]
    knowledge_folder("rules", {"rules.pdf": pdf_bytes(pages)})
    collection = create_collection(agent=agent, name="rules", method="structure", size=1800, overlap=0)
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    (only,) = Paragraph.objects.filter(collection=collection)
    assert (only.page_first, only.page_last) == (1, 3)


def test_the_export_carries_pages_as_an_extra_field_and_an_import_keeps_them(
    agent, knowledge_folder, folder_files, tmp_path
):
    knowledge_folder("office", folder_files)
    collection = create_collection(agent=agent, name="office", method="structure")
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    folder = export_index(collection=collection, directory=tmp_path / "one")
    lines = [json.loads(line) for line in (folder / "docs.jsonl").read_text().splitlines()]
    by_doc = {}
    for line in lines:
        by_doc.setdefault(line["doc_id"], []).append(line.get("pages"))
    assert by_doc["notes.md"] == [None] and by_doc["scan.pdf"] == [[1, 2]]
    # The seed's keys come first, in its order; pages is the only addition.
    assert list(lines[-1]) == [
        "chunk_id",
        "doc_id",
        "source",
        "uri",
        "text",
        "n_tokens",
        "fingerprint",
        "pages",
    ]

    other = create_agent(agent_id="beta", name="Beta")[0]
    copy = import_index(agent=other, directory=tmp_path / "one", index_id="office")
    again = export_index(collection=copy, directory=tmp_path / "two")
    for name in fmt.FILES:
        assert (folder / name).read_bytes() == (again / name).read_bytes(), name


def test_without_tesseract_the_scans_are_refused_with_a_reason_and_the_rest_is_read(
    agent, knowledge_folder, folder_files, monkeypatch, tmp_path
):
    from collections_app.text import bounded

    monkeypatch.setenv("PATH", str(tmp_path))  # the extraction child inherits a PATH with no tesseract
    monkeypatch.setattr(bounded, "_shared", {})  # a fresh child, started with that PATH
    knowledge_folder("office", folder_files)
    collection = create_collection(agent=agent, name="office", method="structure")
    run = build_collection(collection=collection)
    assert run.status == BuildRun.SUCCEEDED_WITH_REVIEW, run.error  # the mixed PDF waits (below)
    assert sorted(run.refused) == ["notice.png", "scan.pdf"]
    assert run.refusal_reasons == {
        "notice.png": "needs OCR (not installed)",
        "scan.pdf": "needs OCR (not installed)",
    }
    mixed = Document.objects.get(collection=collection, name="mixed.pdf")
    assert mixed.status == Document.NEEDS_REVIEW and mixed.ocr_pages == 0
    assert mixed.scan_warnings == ["page 2 has no text layer (needs OCR, not installed)"]


QUESTIONS = {  # a question per file (in the words of its answer: tests embed by hashing), and its page
    "Which car park do staff use?": ("scan.pdf", [1, 2]),
    "When do borrowed books go back to the library?": ("mixed.pdf", [1, 2]),
    "When does outgoing post leave the mail room?": ("mixed.pdf", [3, 3]),
    "Does remote work need a signed agreement?": ("outlined.pdf", [2, 2]),
    "When do fire drills take place?": ("notice.png", [1, 1]),
}


def test_search_answers_a_question_per_file_with_its_page(agent_key, knowledge_folder, folder_files, client):
    from collections_app.services.search import search_collection

    agent, key = agent_key
    knowledge_folder("office", folder_files, agent=agent.agent_id)
    collection = create_collection(agent=agent, name="office", method="structure")
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    for question, (document, pages) in QUESTIONS.items():
        best = search_collection(agent=agent, collection="office", question=question, around=0, min_score=0)[
            "paragraphs"
        ][0]
        assert (best["document"], best["pages"]) == (document, pages), question
        api = client.post(
            "/api/v1/collections/office/search",
            {"question": question, "around": 0, "min_score": 0},
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {key}",
        ).json()
        assert api["paragraphs"][0]["pages"] == pages
    notes = search_collection(
        agent=agent, collection="office", question="public holidays", around=0, min_score=0
    )
    assert notes["paragraphs"][0]["document"] == "notes.md" and notes["paragraphs"][0]["pages"] is None
    schema = client.get("/api/v1/openapi.json").json()["components"]["schemas"]["ParagraphOut"]["properties"]
    assert "pages" in schema


def test_a_pdf_built_before_pages_existed_is_read_again_once(agent, knowledge_folder):
    knowledge_folder("manual", {"manual.pdf": pdf_bytes(MIXED), "notes.md": "# Notes\n\nNo pages here."})
    collection = create_collection(agent=agent, name="manual", method="structure")
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    Paragraph.objects.filter(collection=collection).update(page_first=None, page_last=None)  # an older build
    again = build_collection(collection=collection)
    assert again.documents_reused == 1 and again.documents_read == 1  # the Markdown is reused, the PDF read
    assert not Paragraph.objects.filter(
        collection=collection, document__name="manual.pdf", page_first=None
    ).exists()
    third = build_collection(collection=collection)
    assert third.documents_reused == 2


def test_a_page_filter_keeps_the_paragraphs_on_those_pages(agent, knowledge_folder):
    from collections_app.services.search import search_collection

    knowledge_folder(
        "manual", {"manual.pdf": pdf_bytes(MIXED), "notes.md": "# Notes\n\nThe post room is closed."}
    )
    collection = create_collection(agent=agent, name="manual", method="structure")
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    answer = search_collection(
        agent=agent,
        collection="manual",
        question="post",
        around=0,
        min_score=0,
        filters={"type": "gte", "key": "page", "value": 3},
    )
    assert [p["pages"] for p in answer["paragraphs"]] == [[3, 3]]  # the Markdown has no page: left out
