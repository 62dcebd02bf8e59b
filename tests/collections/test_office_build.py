"""End to end (issue 25): a folder of a deck, a workbook, a CSV file, an e-book, an OpenDocument text, a
Word document with a table and a README builds, and a search answers a question from each file,
under the section (slide, sheet, chapter) it came from."""

import io

import docx
import pytest

from collections_app.models import BuildRun, Document
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from tests.office_files import csv_bytes, epub_bytes, odf_bytes, pptx_bytes, xlsx_bytes


def word_with_table() -> bytes:
    document = docx.Document()
    document.add_heading("Benefits", level=1)
    document.add_paragraph("Every employee may claim the benefits below.")
    table = document.add_table(rows=3, cols=2)
    for row, values in zip(
        table.rows,
        [
            ("Benefit", "Amount"),
            ("Gym subsidy", "30 euros per month"),
            ("Bicycle lease", "up to 2,000 euros"),
        ],
        strict=True,
    ):
        for cell, value in zip(row.cells, values, strict=True):
            cell.text = value
    out = io.BytesIO()
    document.save(out)
    return out.getvalue()


FILES = {
    "deck.pptx": pptx_bytes(
        [
            {"title": "Quarterly results", "lines": ["Revenue grew twelve percent"]},
            {
                "title": "Expansion",
                "lines": ["A new office in Germany"],
                "notes": "The Berlin office opens in March 2027 with forty desks.",
            },
        ]
    ),
    "rooms.xlsx": xlsx_bytes(
        {
            "Staff": [["Name", "Team"], ["Alice", "Sales"]],
            "Rooms": [["Room", "Seats", "Projector"], ["Oak", 14, "yes"], ["Birch", 6, "no"]],
        }
    ),
    "codes.csv": csv_bytes(
        [["Code", "Meaning"]]
        + [[f"E{n:04d}", f"pump stage {n} stalled"] for n in range(120)]
        + [["E9001", "the coolant reservoir is empty"]]
    ),
    "tale.epub": epub_bytes(
        [
            (
                "The Keeper",
                "<h1>The Keeper</h1><p>Old Marta guards the lighthouse on the"
                " northern cape every winter night.</p>",
            )
        ]
    ),
    "minutes.odt": odf_bytes(
        '<text:h text:outline-level="1">Board minutes</text:h><text:p>The board approved'
        " the solar roof for the warehouse in Ghent.</text:p>"
    ),
    "benefits.docx": word_with_table(),
    "README": "Start here: the shared drive keeps policies, minutes and the parts catalogue.\n",
}

QUESTIONS = [
    ("When does the Berlin office open?", "deck.pptx", "Slide 2: Expansion", "March 2027"),
    ("How many seats does the Oak room have?", "rooms.xlsx", "Rooms", "| Oak | 14 | yes |"),
    ("Which error code means the coolant reservoir is empty?", "codes.csv", "Document", "| E9001 |"),
    ("Who guards the lighthouse on the northern cape?", "tale.epub", "The Keeper", "Old Marta"),
    ("What did the board approve for the warehouse in Ghent?", "minutes.odt", "Board minutes", "solar roof"),
    ("How much is the gym subsidy?", "benefits.docx", "Benefits", "| Gym subsidy | 30 euros per month |"),
    ("Where does the shared drive keep the parts catalogue?", "README", "Document", "Start here"),
]


@pytest.mark.django_db
def test_a_folder_of_office_files_builds_and_each_answers_a_question_under_its_section(
    agent, knowledge_folder
):
    knowledge_folder("office", FILES)
    collection = create_collection(agent=agent, name="office", method="structure")
    run = build_collection(collection=collection)
    assert run.status == BuildRun.SUCCEEDED, run.error
    assert run.refused == []
    statuses = dict(Document.objects.filter(collection=collection).values_list("name", "status"))
    assert statuses == {name: Document.ACTIVE for name in FILES}
    # Lexical, because the tests' embedder is feature hashing (no model): its cosine is noise that
    # can outrank a long table block. With the real model (MiniLM, hybrid) the same questions find the
    # same paragraphs first (docs/history/benchmarks-log.md, "A folder of office files").
    for question, document, section, marker in QUESTIONS:
        answer = search_collection(
            agent=agent,
            collection=collection,
            question=question,
            most=3,
            around=0,
            min_score=0.0,
            mode="lexical",
        )
        best = answer["paragraphs"][0]
        assert best["chunk_id"].startswith(f"{document}#"), (question, best)
        assert best["section"] == section, (question, best)
        assert marker in best["text"], (question, best)


@pytest.mark.django_db
def test_slides_and_sheets_give_their_paragraphs_pages(agent, knowledge_folder):
    from collections_app.models import Paragraph

    knowledge_folder("paged", {name: FILES[name] for name in ("deck.pptx", "rooms.xlsx", "codes.csv")})
    collection = create_collection(agent=agent, name="paged", method="structure")
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    pages = {
        (p.document.name, p.section): (p.page_first, p.page_last)
        for p in Paragraph.objects.filter(collection=collection).select_related("document")
    }
    assert pages[("deck.pptx", "Slide 2: Expansion")] == (2, 2)
    assert pages[("rooms.xlsx", "Rooms")] == (2, 2)  # the workbook's second sheet
    assert pages[("codes.csv", "Document")] == (None, None)
    answer = search_collection(
        agent=agent,
        collection=collection,
        question="When does the Berlin office open?",
        most=1,
        around=0,
        min_score=0.0,
        mode="lexical",
    )
    assert answer["paragraphs"][0]["pages"] == [2, 2]


def test_a_sheets_unsaved_formulas_are_said_on_the_document_page_and_kept_across_rebuilds(
    agent, knowledge_folder, admin_client
):
    from django.urls import reverse

    sheets = {"Budget": [["Item", "Price", "Count", "Total"], ["Laptop", 1450, 40, "=B2*C2"]]}
    knowledge_folder("budget", {"it-budget.xlsx": xlsx_bytes(sheets)})
    collection = create_collection(agent=agent, name="budget")
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    document = Document.objects.get(collection=collection)
    assert document.status == Document.ACTIVE and document.scan_warnings == []
    assert "sheet 'Budget': 1 formula cell with no saved value" in document.read_notes[0]
    again = build_collection(collection=collection)
    assert again.documents_reused == 1
    document.refresh_from_db()
    assert len(document.read_notes) == 1  # a reused document keeps what its reading said
    page = admin_client.get(reverse("admin:collections_app_document_change", args=[document.pk]))
    assert "1 formula cell with no saved value" in page.content.decode()
