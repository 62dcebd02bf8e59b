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

    answer = search_collection(agent=agent, collection="handbook", question="Which laptops need disk encryption?")
    assert answer["mode"] == "hybrid" and answer["model"] == "all-MiniLM-L6-v2"
    assert answer["paragraphs"] and "encryption" in answer["paragraphs"][0]["text"].lower()

    # With a real model an unrelated question scores above zero; the floor is what removes it.
    unrelated = search_collection(agent=agent, collection="handbook", question="recipe for sourdough bread starter")
    assert unrelated["paragraphs"] == []
    unfloored = search_collection(agent=agent, collection="handbook", question="recipe for sourdough bread starter",
                                  min_score=0)
    assert unfloored["paragraphs"] and all(p["score"] < 0.25 for p in unfloored["paragraphs"])


def test_the_window_and_tokens_strategies_cut_against_the_real_tokenizer(agent, knowledge_folder, local_model):
    from collections_app.models import Paragraph

    knowledge_folder("windowed", samples=True)
    for method in ("window", "tokens"):
        collection = create_collection(agent=agent, name=f"windowed-{method}", method=method)
        knowledge_folder(f"windowed-{method}", samples=True)
        assert build_collection(collection=collection).status == "succeeded"
        counts = list(Paragraph.objects.filter(collection=collection).values_list("token_count", flat=True))
        assert counts and max(counts) <= embedding.get_embedder().window
