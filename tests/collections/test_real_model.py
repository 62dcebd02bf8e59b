"""The build and search users rely on, once end to end with the real local model (no torch)."""

import pytest

from collections_app.models import CollectionBuilt
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from ragsite import embedding

pytestmark = [pytest.mark.model, pytest.mark.django_db]


@pytest.fixture
def local_model(settings):
    settings.EMBED_BACKEND = "local"


def test_the_sample_handbook_builds_and_answers_with_the_real_model(agent, knowledge_folder, local_model):
    collection = create_collection(agent=agent, name="handbook", built_from="the sample handbook")
    knowledge_folder("handbook", samples=True)
    run = build_collection(collection=collection)
    assert run.status == "succeeded", run.error
    built = CollectionBuilt.objects.get(collection=collection)
    assert (built.model, built.dimensions, built.refused) == ("all-MiniLM-L6-v2", 384, [])

    answer = search_collection(
        agent=agent, collection="handbook", question="Which laptops need disk encryption?"
    )
    assert answer["mode"] == "hybrid" and answer["model"] == "all-MiniLM-L6-v2"
    assert answer["paragraphs"] and "encryption" in answer["paragraphs"][0]["text"].lower()

    # With a real model an unrelated question scores above zero; the floor is what removes it.
    unrelated = search_collection(
        agent=agent, collection="handbook", question="recipe for sourdough bread starter"
    )
    assert unrelated["paragraphs"] == []
    unfloored = search_collection(
        agent=agent, collection="handbook", question="recipe for sourdough bread starter", min_score=0
    )
    assert unfloored["paragraphs"] and all(p["score"] < unrelated["floor"] for p in unfloored["paragraphs"])


@pytest.fixture
def sample_handbook(agent, knowledge_folder, local_model):
    collection = create_collection(agent=agent, name="handbook", built_from="the sample handbook")
    knowledge_folder("handbook", samples=True)
    assert build_collection(collection=collection).status == "succeeded"
    return collection


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("How many leave days carry over?", "Carry-over is capped at five days."),
        ("Can I expense alcohol at a client dinner?", "Alcohol is never reimbursed"),
        ("What is the mileage rate?", "Mileage is reimbursed at 0.42 per kilometre"),
        ("Do I need safety shoes in the workshop?", "Steel-toed shoes are required"),
        ("Is there a gym allowance?", "A gym subsidy of 30 euros per month"),
        ("How long is probation?", "The probation period lasts six months."),
    ],
)
def test_everyday_handbook_questions_are_answered_at_the_default_floor(
    agent, sample_handbook, question, answer
):
    found = search_collection(agent=agent, collection="handbook", question=question)
    # Compared as measure compares: a PDF's line breaks are spaces.
    assert any(answer in " ".join(p["text"].split()) for p in found["paragraphs"])


def test_the_capital_of_france_gets_nothing_from_the_handbook(agent, sample_handbook):
    assert (
        search_collection(agent=agent, collection="handbook", question="What is the capital of France?")[
            "paragraphs"
        ]
        == []
    )


@pytest.mark.xfail(
    strict=True,
    reason=(
        "issue 12 target missed: 'lose my laptop' scores 0.133 and 'first day' 0.205 under the 0.22 floor, "
        "below dev-set controls; see docs/decisions/0035"
    ),
)
@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("What do I do if I lose my laptop?", "A lost or stolen device is reported to the security desk"),
        ("When does my first day start?", "Your first day starts at 09:00"),
    ],
)
def test_the_lost_laptop_and_the_first_day_are_answered_at_the_default_floor(
    agent, sample_handbook, question, answer
):
    found = search_collection(agent=agent, collection="handbook", question=question)
    assert any(answer in p["text"] for p in found["paragraphs"])


def test_the_window_and_tokens_strategies_cut_against_the_real_tokenizer(
    agent, knowledge_folder, local_model
):
    from collections_app.models import Paragraph

    knowledge_folder("windowed", samples=True)
    for method in ("window", "tokens"):
        collection = create_collection(agent=agent, name=f"windowed-{method}", method=method)
        knowledge_folder(f"windowed-{method}", samples=True)
        assert build_collection(collection=collection).status == "succeeded"
        counts = list(Paragraph.objects.filter(collection=collection).values_list("token_count", flat=True))
        assert counts and max(counts) <= embedding.get_embedder().window


def test_the_demo_answers_its_own_questions_with_no_warning(
    monkeypatch, local_model, django_capture_on_commit_callbacks
):
    """`make run`'s handbook reads its floor off its known answers: with the real model they separate from
    the controls (no warning on the first login), and the floor read off them answers the questions the
    demo and the walkthrough ask."""
    from io import StringIO
    from pathlib import Path

    from django.core.management import call_command

    from collections_app.models import Collection
    from collections_app.services import known_answers

    samples = Path(__file__).resolve().parents[2] / "collections_app" / "sample_docs"
    monkeypatch.setenv("KNOWLEDGE_HANDBOOK_FOLDER", str(samples))
    with django_capture_on_commit_callbacks(execute=True):
        call_command("demo", stdout=StringIO(), stderr=StringIO())
    handbook = Collection.objects.get(name="handbook")
    report = known_answers.latest_report(handbook)
    assert report.separates is True and report.warnings == [] and report.floor_source == "measured"
    for question, answer in (
        ("What do I do if I lose my laptop?", "A lost or stolen device is reported to the security desk"),
        ("When does my first day start?", "Your first day starts at 09:00"),
        ("How many leave days carry over?", "Carry-over is capped at five days"),
    ):
        found = search_collection(agent=handbook.agent, collection=handbook, question=question)
        assert found["floor_source"] == "measured"
        assert any(answer in " ".join(p["text"].split()) for p in found["paragraphs"]), question
