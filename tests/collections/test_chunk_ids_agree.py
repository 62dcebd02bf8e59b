"""Seed 004: the chunk_id an answer cites is the one docs.jsonl holds, whatever was switched or labelled.

After each change in a sequence of paragraph and document switches and label edits, every chunk id a
search answer gives resolves, through the MCP resource (`citations.read_cited`) and in an export of
that moment, to the same text; and the export keeps the seed's rules (chunk_id `<doc_id>#<k>` with k
the chunk's position in its document, line i chunk i)."""

import json

import pytest

from collections_app.models import Document, Paragraph
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.citations import read_cited
from collections_app.services.documents import set_documents_enabled, set_paragraphs_enabled
from collections_app.services.interchange import export_index
from collections_app.services.readers.labels import add_labels, labels_named, remove_labels
from collections_app.services.search import search_collection

pytestmark = pytest.mark.django_db

RULES = {
    "leave.md": "\n\n".join(
        f"Leave rule {word}: staff {word} may carry over days of annual leave with approval."
        for word in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
    ),
    "travel.md": "\n\n".join(
        f"Travel rule {word}: mileage and train tickets for trip {word} are paid back monthly."
        for word in ("golf", "hotel", "india", "juliet")
    ),
}
QUESTIONS = ("carry over annual leave", "mileage train tickets", "leave rule delta", "trip hotel")


def _paragraph(collection, document: str, index: int) -> Paragraph:
    return Paragraph.objects.get(collection=collection, document__name=document, index=index)


def _check_seed_rules(folder) -> dict[str, str]:
    """docs.jsonl as seed 004 states it, read raw; returns {chunk_id: text}."""
    lines = (folder / "docs.jsonl").read_text(encoding="utf-8").splitlines()
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    assert meta["n_chunks"] == len(lines)
    assert (folder / "vectors.f32").stat().st_size == len(lines) * meta["dim"] * 4
    seen: dict[str, int] = {}
    texts = {}
    for line in lines:  # line i is chunk i: the order is the file's
        item = json.loads(line)
        k = seen.get(item["doc_id"], 0)
        assert item["chunk_id"] == f"{item['doc_id']}#{k}"  # k: the chunk's position in its document
        seen[item["doc_id"]] = k + 1
        texts[item["chunk_id"]] = item["text"]
    return texts


def test_search_resources_and_export_cite_the_same_paragraph_through_switches_and_labels(
    agent, knowledge_folder, tmp_path
):
    collection = create_collection(agent=agent, name="rules", method="fixed", size=90)
    knowledge_folder("rules", RULES)
    assert build_collection(collection=collection).status == "succeeded"
    assert Paragraph.objects.filter(collection=collection, document__name="leave.md").count() >= 5
    [label] = labels_named(["hr"], create=True)

    steps = [
        (
            "disable leave.md#1",
            lambda: set_paragraphs_enabled(paragraphs=[_paragraph(collection, "leave.md", 1)], enabled=False),
        ),
        ("label leave.md#3", lambda: add_labels([_paragraph(collection, "leave.md", 3)], [label])),
        (
            "disable leave.md#3",
            lambda: set_paragraphs_enabled(paragraphs=[_paragraph(collection, "leave.md", 3)], enabled=False),
        ),
        (
            "disable travel.md",
            lambda: set_documents_enabled(
                documents=Document.objects.filter(collection=collection, name="travel.md"), enabled=False
            ),
        ),
        (
            "enable leave.md#1",
            lambda: set_paragraphs_enabled(paragraphs=[_paragraph(collection, "leave.md", 1)], enabled=True),
        ),
        (
            "enable travel.md",
            lambda: set_documents_enabled(
                documents=Document.objects.filter(collection=collection, name="travel.md"), enabled=True
            ),
        ),
        ("unlabel leave.md#3", lambda: remove_labels([_paragraph(collection, "leave.md", 3)], [label])),
        (
            "disable travel.md#0",
            lambda: set_paragraphs_enabled(
                paragraphs=[_paragraph(collection, "travel.md", 0)], enabled=False
            ),
        ),
    ]
    for number, (what, change) in enumerate(steps):
        change()
        exported = _check_seed_rules(export_index(collection=collection, directory=tmp_path / str(number)))
        cited = 0
        for question in QUESTIONS:
            answer = search_collection(
                agent=agent, collection=collection, question=question, around=0, min_score=0.0, most=20
            )
            for paragraph in answer["paragraphs"]:
                chunk_id = paragraph["chunk_id"]
                assert exported.get(chunk_id) == paragraph["text"], (what, chunk_id)
                shown = read_cited(agent=agent, collection="rules", chunk_id=chunk_id)
                assert shown["text"] == paragraph["text"], (what, chunk_id)
                cited += 1
        # Every exported chunk is reachable by its id through the resource, with the export's text.
        for chunk_id, text in exported.items():
            assert read_cited(agent=agent, collection="rules", chunk_id=chunk_id)["text"] == text, what
        assert cited >= len(QUESTIONS), what
