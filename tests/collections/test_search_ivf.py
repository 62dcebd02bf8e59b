"""Search through the IVF approximate path: above IVF_MIN_PARAGRAPHS the candidates are the IVF's
vector top-K (IVF_NPROBE nearest lists) and the lexical top-K, each scored exactly; below it, every
row is scored exactly."""

import logging

import pytest

from collections_app.models import CollectionBuilt
from collections_app.services import search as search_module
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.search import collection_index, search_collection
from ragsite.lexical import terms
from tests.conftest import HANDBOOK

pytestmark = pytest.mark.django_db

QUESTION = "how many days of annual leave carry over"
WORDS = "amber basalt cobalt delta ember fjord granite harbor indigo juniper kelp lagoon meadow nickel".split()


def filler(count: int = 30) -> dict[str, str]:
    """Documents about nothing the question asks, so the collection has enough rows for several lists."""
    docs = {}
    for i in range(count):
        a, b, c = WORDS[i % len(WORDS)], WORDS[(i * 3 + 1) % len(WORDS)], WORDS[(i * 5 + 2) % len(WORDS)]
        docs[f"note-{i:02d}.md"] = (
            f"# Note {i}\n\nThe {a} survey of {b} number {i} was filed.\n\n"
            f"Samples of {c} and {a} were kept in crate {i}.\n\nThe {b} report {i} is archived.\n"
        )
    return docs


@pytest.fixture
def library(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="library", method="fixed", size=80)
    knowledge_folder("library", {**HANDBOOK, **filler()})
    assert build_collection(collection=collection).status == "succeeded"
    return collection


def index_of(collection):
    return collection_index(collection, CollectionBuilt.objects.get(collection=collection))


def ivf_of_library(collection):
    cached = search_module._ivf_cache.get(collection.pk)
    return None if cached is None else cached[1]


def ask(agent, collection, **kwargs):
    kwargs.setdefault("around", 0)
    return search_collection(agent=agent, collection=collection, question=QUESTION, **kwargs)


@pytest.fixture(autouse=True)
def _fresh_ivf():
    search_module._ivf_cache.clear()


def test_an_ivf_search_still_finds_the_answering_paragraph_with_the_same_answer_shape(
    agent, library, settings, caplog
):
    settings.IVF_MIN_PARAGRAPHS, settings.IVF_NPROBE = 1, 2
    with caplog.at_level(logging.DEBUG, logger="ragsite.search"):
        answer = ask(agent, library, min_score=0)
    ivf = ivf_of_library(library)
    assert ivf is not None and ivf.nlist > 2  # truly approximate: not every list was scored
    assert set(answer) == {"paragraphs", "floor", "floor_source", "around", "mode", "model", "refused", "judge",
                           "rerank"}
    assert answer["mode"] == "hybrid"
    assert "capped at five days" in answer["paragraphs"][0]["text"]
    assert set(answer["paragraphs"][0]) == {"text", "score", "document", "section", "passages", "chunk_id", "chunk_ids",
                                          "first", "last"}
    assert any("IVF cosine, nprobe 2" in record.getMessage() for record in caplog.records)
    assert QUESTION not in caplog.text


def test_the_ivf_is_built_once_per_build_and_rebuilt_with_a_new_build(agent, library, settings):
    settings.IVF_MIN_PARAGRAPHS = 1
    ask(agent, library)
    first = ivf_of_library(library)
    ask(agent, library, mode="vector")
    assert ivf_of_library(library) is first
    assert build_collection(collection=library).status == "succeeded"
    ask(agent, library)
    assert ivf_of_library(library) is not None and ivf_of_library(library) is not first


def test_every_candidate_gets_its_exact_cosine_and_bm25_whatever_lists_were_probed(agent, library, settings):
    """Hybrid candidates are the IVF's vector top-K plus the lexical top-K, each scored exactly on both
    arms: a paragraph outside the probed lists keeps its true cosine rather than 0."""
    settings.IVF_MIN_PARAGRAPHS = 0
    exact = {p["text"]: p["score"] for p in ask(agent, library, most=50, min_score=0.0)["paragraphs"]}
    settings.IVF_MIN_PARAGRAPHS, settings.IVF_NPROBE = 1, 1
    approximate = ask(agent, library, most=50, min_score=0.0)["paragraphs"]
    assert ivf_of_library(library).nlist > 1
    # Every row comes back (the lexical top-K and the one probed list cover the small collection
    # between them or not; whichever rows come back carry exactly the flat path's score).
    assert approximate and all(p["score"] == exact[p["text"]] for p in approximate)


def test_the_top_ten_equals_the_flat_path_when_the_true_top_ten_are_candidates(agent, library, settings):
    settings.IVF_MIN_PARAGRAPHS = 0
    flat = ask(agent, library, most=10, min_score=0.0)
    settings.IVF_MIN_PARAGRAPHS, settings.IVF_NPROBE = 1, 1
    approximate = ask(agent, library, most=10, min_score=0.0)
    # The collection is smaller than the lexical candidate depth, so every paragraph holding a
    # question term is a candidate; the flat top ten that do are ranked identically.
    assert index_of(library).size < search_module.CANDIDATE_DEPTH
    question_terms = set(terms(QUESTION))
    lexical_hits = [p for p in flat["paragraphs"] if question_terms & set(terms(p["text"]))]
    assert len(lexical_hits) >= 2
    assert [p for p in approximate["paragraphs"] if p in lexical_hits] == lexical_hits
    assert approximate["paragraphs"][0] == flat["paragraphs"][0]


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_nprobe_covering_every_list_equals_the_exact_search(agent, library, settings, mode):
    settings.IVF_MIN_PARAGRAPHS = 0
    exact = ask(agent, library, mode=mode, most=50, min_score=0.0)
    assert ivf_of_library(library) is None
    settings.IVF_MIN_PARAGRAPHS, settings.IVF_NPROBE = 1, 10_000
    approximate = ask(agent, library, mode=mode, most=50, min_score=0.0)
    assert ivf_of_library(library) is not None
    assert approximate == exact


@pytest.mark.parametrize("threshold", [0, "size + 1", 50_000])
def test_below_the_threshold_the_ivf_is_never_built(agent, library, settings, threshold):
    size = index_of(library).size
    settings.IVF_MIN_PARAGRAPHS = size + 1 if threshold == "size + 1" else threshold
    answer = ask(agent, library)
    assert "capped at five days" in answer["paragraphs"][0]["text"]
    assert ivf_of_library(library) is None


def test_the_default_threshold_is_fifty_thousand_and_nprobe_eight():
    import re
    from pathlib import Path

    from collections_app.conf import settings as app_settings

    # The defaults are declared once, in ragsite/settings.py.
    source = (Path(__file__).resolve().parents[2] / "ragsite" / "settings.py").read_text()
    assert re.search(r'"IVF_MIN_PARAGRAPHS", default=50_?000\)', source)
    assert re.search(r'"IVF_NPROBE", default=8\)', source)
    assert int(app_settings.IVF_MIN_PARAGRAPHS) == 50_000 and int(app_settings.IVF_NPROBE) == 8
