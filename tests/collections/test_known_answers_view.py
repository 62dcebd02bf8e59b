"""Known answers see what search sees (issue 30): measured over the rows a search would rank.

A question answered only by a document the librarian had disabled was reported "found, rank 1, 0.539"
while no search returned it. The report must equal what a twin collection without the hidden rows
answers, and a per-reader collection's report says whose view it measured.
"""

import pytest

from collections_app.models import BuildRun, KnownAnswersReport, Paragraph
from collections_app.services import known_answers as k
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.documents import set_documents_enabled, set_paragraphs_enabled
from tests.conftest import HANDBOOK

from .test_known_answers import ITEMS, found_by_search

pytestmark = pytest.mark.django_db

MILEAGE = {"question": "what is mileage reimbursed at per kilometre", "answer": "0.42 per kilometre"}


def built(agent, knowledge_folder, name, files, capture, **options):
    collection = create_collection(agent=agent, name=name, method="fixed", size=80, **options)
    knowledge_folder(name, files)
    k.set_known_answers(collection=collection, items=ITEMS)
    with capture(execute=True):
        assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    return collection


def latest(collection) -> dict:
    report = KnownAnswersReport.objects.filter(collection=collection).order_by("-measured_at").first()
    return {r["question"]: r for r in report.results}


def seen(result: dict) -> tuple:
    if result["control"]:
        return result["top_score"], result["returned"]
    return result["found"], result["rank"], result["score"], result["top_score"]


def test_a_disabled_document_is_not_found_and_the_report_equals_a_twin_without_it(
    agent, knowledge_folder, django_capture_on_commit_callbacks
):
    collection = built(agent, knowledge_folder, "handbook", HANDBOOK, django_capture_on_commit_callbacks)
    assert latest(collection)[MILEAGE["question"]]["found"]
    # Switching the document off asks the known answers again, over what search now reads.
    with django_capture_on_commit_callbacks(execute=True):
        assert (
            set_documents_enabled(documents=collection.documents.filter(name="travel.md"), enabled=False) == 1
        )
    report = latest(collection)
    assert not report[MILEAGE["question"]]["found"]
    assert not found_by_search(collection, MILEAGE["question"], MILEAGE["answer"], min_score=0.0, most=50)
    twin = built(
        agent,
        knowledge_folder,
        "twin",
        {n: t for n, t in HANDBOOK.items() if n != "travel.md"},
        django_capture_on_commit_callbacks,
    )
    assert {q: seen(r) for q, r in report.items()} == {q: seen(r) for q, r in latest(twin).items()}
    with django_capture_on_commit_callbacks(execute=True):
        set_documents_enabled(documents=collection.documents.filter(name="travel.md"), enabled=True)
    assert latest(collection)[MILEAGE["question"]]["found"]


def test_a_disabled_paragraph_is_not_found_either(
    agent, knowledge_folder, django_capture_on_commit_callbacks
):
    collection = built(agent, knowledge_folder, "handbook", HANDBOOK, django_capture_on_commit_callbacks)
    mileage = Paragraph.objects.filter(collection=collection, text__contains="0.42 per kilometre")
    with django_capture_on_commit_callbacks(execute=True):
        assert set_paragraphs_enabled(paragraphs=mileage, enabled=False) == 1
    assert not latest(collection)[MILEAGE["question"]]["found"]


def test_a_per_reader_collections_report_says_whose_view_it_measured(
    agent, knowledge_folder, django_capture_on_commit_callbacks
):
    collection = built(
        agent, knowledge_folder, "secret", HANDBOOK, django_capture_on_commit_callbacks, per_reader=True
    )
    described = k.describe(collection)
    assert k.EVERY_LABEL in described["report"]["warnings"]
    plain = built(agent, knowledge_folder, "open", HANDBOOK, django_capture_on_commit_callbacks)
    assert k.EVERY_LABEL not in k.describe(plain)["report"]["warnings"]
