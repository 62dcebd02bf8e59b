"""Search through the IVF approximate path: above IVF_MIN_PARAGRAPHS the cosine is scored only for
the rows in the IVF_NPROBE nearest lists; below it, exactly as before."""

import logging

import pytest

from collections_app.models import CollectionBuilt
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.search import collection_index, search_collection
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


def ask(agent, collection, **kwargs):
    kwargs.setdefault("around", 0)
    return search_collection(agent=agent, collection=collection, question=QUESTION, **kwargs)


def test_an_ivf_search_still_finds_the_answering_paragraph_with_the_same_answer_shape(
    agent, library, settings, caplog
):
    settings.IVF_MIN_PARAGRAPHS, settings.IVF_NPROBE = 1, 2
    with caplog.at_level(logging.DEBUG, logger="ragsite.search"):
        # Unfloored: whether the hash embedder puts the answer in one of the two probed lists is
        # incidental (a paragraph's vector now embeds its title too); an unprobed row still ranks
        # on BM25, which is what lets the approximate path answer at all.
        answer = ask(agent, library, min_score=0)
    index = index_of(library)
    assert index.ivf is not None and index.ivf.nlist > 2  # truly approximate: not every list was scored
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
    first = index_of(library).ivf
    ask(agent, library, mode="vector")
    assert index_of(library).ivf is first
    assert build_collection(collection=library).status == "succeeded"
    ask(agent, library)
    assert index_of(library).ivf is not None and index_of(library).ivf is not first


def test_rows_outside_the_probed_lists_get_no_cosine_but_still_rank_on_bm25(agent, library, settings):
    settings.IVF_MIN_PARAGRAPHS, settings.IVF_NPROBE = 1, 1
    vector_answer = ask(agent, library, mode="vector", most=50, min_score=0.0)
    index = index_of(library)
    probed = max(len(rows) for rows in index.ivf.lists)
    # Vector mode ranks only the probed list's rows above zero.
    assert sum(p["score"] > 0 for p in vector_answer["paragraphs"]) <= probed < index.size
    hybrid = ask(agent, library, min_score=0.0, most=50)
    assert "capped at five days" in hybrid["paragraphs"][0]["text"]


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
def test_nprobe_covering_every_list_equals_the_exact_search(agent, library, settings, mode):
    settings.IVF_MIN_PARAGRAPHS = 0
    exact = ask(agent, library, mode=mode, most=50, min_score=0.0)
    assert index_of(library).ivf is None
    settings.IVF_MIN_PARAGRAPHS, settings.IVF_NPROBE = 1, 10_000
    approximate = ask(agent, library, mode=mode, most=50, min_score=0.0)
    assert index_of(library).ivf is not None
    assert approximate == exact


@pytest.mark.parametrize("threshold", [0, "size + 1", 50_000])
def test_below_the_threshold_the_ivf_is_never_built(agent, library, settings, threshold):
    size = index_of(library).size
    settings.IVF_MIN_PARAGRAPHS = size + 1 if threshold == "size + 1" else threshold
    answer = ask(agent, library)
    assert "capped at five days" in answer["paragraphs"][0]["text"]
    index = index_of(library)
    assert index.ivf is None and index.ivf_rows is None


def test_the_default_threshold_is_fifty_thousand_and_nprobe_eight():
    import re
    from pathlib import Path

    from collections_app.conf import settings as app_settings

    # The defaults are declared once, in ragsite/settings.py.
    source = (Path(__file__).resolve().parents[2] / "ragsite" / "settings.py").read_text()
    assert re.search(r'"IVF_MIN_PARAGRAPHS", default=50_?000\)', source)
    assert re.search(r'"IVF_NPROBE", default=8\)', source)
    assert int(app_settings.IVF_MIN_PARAGRAPHS) == 50_000 and int(app_settings.IVF_NPROBE) == 8
