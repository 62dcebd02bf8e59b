"""Filters obey the reader's mask: whatever makes a filter valid or not (pages) is judged over what the
reader may read, so a collection with hidden paged documents answers exactly as its twin without them."""

import shutil

import pytest

from collections_app.models import Document, Label, Paragraph
from collections_app.services.agents import create_collection, create_reader
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from ragsite.errors import RagsiteError
from tests.conftest import HANDBOOK, SAMPLE_DOCS

pytestmark = pytest.mark.django_db

PAGE_FILTERS = [
    {"type": "eq", "key": "page", "value": 1},
    {"type": "gte", "key": "page", "value": 1},
    {"type": "ne", "key": "page", "value": 2},
    {"type": "in", "key": "page", "value": [1, 2]},
    {
        "type": "or",
        "filters": [{"type": "eq", "key": "page", "value": 1}, {"type": "eq", "key": "team", "value": "x"}],
    },
]


def _outcome(agent, collection, reader, filters, question):
    try:
        answer = search_collection(
            agent=agent, collection=collection, question=question, reader=reader, filters=filters, min_score=0
        )
    except RagsiteError as exc:
        return ("refused", exc.status, exc.code, exc.message)
    return ("answered", [(p["document"], p["text"], p["score"]) for p in answer["paragraphs"]])


def test_a_page_filter_answers_a_reader_as_the_twin_without_hidden_paged_documents(agent, knowledge_folder):
    labs_folder = knowledge_folder("labs", HANDBOOK)
    shutil.copy(SAMPLE_DOCS / "safety.pdf", labs_folder / "safety.pdf")
    knowledge_folder("twin", HANDBOOK)
    labs = create_collection(agent=agent, name="labs", method="fixed", size=80, per_reader=True)
    twin = create_collection(agent=agent, name="twin", method="fixed", size=80, per_reader=True)
    assert build_collection(collection=labs).status == "succeeded"
    assert build_collection(collection=twin).status == "succeeded"
    pdf = Document.objects.get(collection=labs, name="safety.pdf")
    assert Paragraph.objects.filter(document=pdf).exclude(page_first=None).exists()  # it has pages
    secret = Label.objects.create(name="secret")
    Label.objects.create(name="pub")
    for paragraph in Paragraph.objects.filter(document=pdf):
        paragraph.labels.add(secret)
    create_reader(external_id="alice", labels=["pub"])
    create_reader(external_id="bob", labels=["pub", "secret"])
    compared = 0
    for reader in ("alice", "ghost"):
        for filters in PAGE_FILTERS:
            for question in ("safety equipment", "annual leave"):
                seen = _outcome(agent, labs, reader, filters, question)
                assert seen == _outcome(agent, twin, reader, filters, question), (reader, filters, question)
                compared += 1
    assert compared == 20
    # The reader who may read the pages filters on them.
    answer = search_collection(
        agent=agent, collection=labs, question="safety", reader="bob", filters=PAGE_FILTERS[0], min_score=0
    )
    assert {p["document"] for p in answer["paragraphs"]} == {"safety.pdf"}
