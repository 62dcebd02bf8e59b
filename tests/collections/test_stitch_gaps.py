"""A stitched run joins two pieces only where the document's text runs on between them; across any gap
(a paragraph hidden from this reader, disabled, filtered out or deleted, a piece cut short) the join is
a visible elision, and a heading keeps its own line (DESIGN.md §5, *Around*; seed 000: a run never
bridges a gap silently)."""

from pathlib import Path

import pytest

from collections_app.models import Label, Paragraph
from collections_app.services.agents import create_collection, create_reader
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from collections_app.text.chunking import chunk
from collections_app.text.stitch import ELISION, Row, join_rows, stitch
from tests.conftest import HANDBOOK

SAMPLE = Path(__file__).resolve().parents[2] / "collections_app" / "sample_docs" / "handbook.md"


def rows_of(text: str, method: str, **sizes) -> dict[int, Row]:
    pieces = chunk(text, method, **sizes)
    return {k: Row(k, 0, p.start, p.end, p.text, p.section or "", k) for k, p in enumerate(pieces)}


def test_a_heading_keeps_its_own_line_after_the_paragraph_before_it():
    """The README's demo: "…the stricter of the two applies. ## Leave policy" was a space-glued heading."""
    rows = rows_of(SAMPLE.read_text(), "structure")
    [run] = stitch([(1, 0.9)], rows, around=3)
    assert "the stricter of the two applies.\n\n## Leave policy" in run.text
    assert "applies. ##" not in run.text and ELISION not in run.text


@pytest.mark.parametrize(
    "method, sizes", [("fixed", {"size": 40}), ("structure", {"size": 60, "overlap": 20})]
)
def test_window_pieces_of_one_paragraph_read_as_the_document_and_a_missing_one_is_marked(method, sizes):
    text = HANDBOOK["leave.md"]
    rows = rows_of(text, method, **sizes)
    assert len(rows) >= 4
    whole = join_rows(list(rows.values()))
    assert ELISION not in whole
    assert whole.split() == text.split()  # the document's words, in order, none repeated or lost
    # A piece missing from the middle (the rows either side keep their own positions): an elision.
    middle = len(rows) // 2
    kept = [row for k, row in rows.items() if k != middle]
    joined = join_rows(kept)
    assert joined.count(ELISION) == (0 if kept[middle].start < kept[middle - 1].end else 1)


def test_a_piece_the_budget_shortened_is_never_joined_as_if_whole():
    first = Row(0, 0, 0, 21, "Alpha one. Alpha two.", "", 0)
    second = Row(1, 0, 22, 32, "Beta once.", "", 1)
    assert join_rows([first, second]) == "Alpha one. Alpha two. Beta once."
    shortened = Row(0, 0, 0, 10, "Alpha one.", "", 0, cut_after=True)
    assert join_rows([shortened, second]) == "Alpha one." + ELISION + "Beta once."


@pytest.fixture
def leave(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="hb", method="fixed", size=60)
    knowledge_folder("hb", HANDBOOK)
    assert build_collection(collection=collection).status == "succeeded"
    return collection


def middle_of_leave(collection) -> Paragraph:
    return Paragraph.objects.get(collection=collection, document__name="leave.md", index=1)


@pytest.mark.django_db
def test_a_disabled_middle_paragraph_leaves_a_marked_gap(agent, leave):
    """The seeds review's probe: "…capped at five days a Requests for leave…" read as one sentence."""
    hidden = middle_of_leave(leave)
    Paragraph.objects.filter(pk=hidden.pk).update(enabled=False)
    question = "Carry-over of annual leave is capped"
    [run] = search_collection(agent=agent, collection=leave, question=question, around=1, most=1)[
        "paragraphs"
    ]
    assert run["chunk_ids"] == ["leave.md#0", "leave.md#2"]
    before, after = run["text"].split(ELISION)
    assert hidden.text not in run["text"] and before.strip() and after.strip()


@pytest.mark.django_db
def test_a_middle_paragraph_hidden_from_the_reader_leaves_the_same_marked_gap(agent, leave):
    leave.per_reader = True
    leave.save(update_fields=["per_reader"])
    secret, public = Label.objects.create(name="secret"), Label.objects.create(name="pub")
    hidden = middle_of_leave(leave)
    for paragraph in Paragraph.objects.filter(collection=leave):
        paragraph.labels.add(secret if paragraph.pk == hidden.pk else public)
    create_reader(external_id="eve", labels=["pub"])
    [run] = search_collection(
        agent=agent,
        collection=leave,
        question="Carry-over of annual leave is capped",
        reader="eve",
        around=2,
        most=1,
    )["paragraphs"]
    assert ELISION in run["text"] and hidden.text not in run["text"]
    assert run["chunk_ids"][:2] == ["leave.md#0", "leave.md#1"]  # the reader's own numbering, no hole
