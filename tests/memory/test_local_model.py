"""Record nodes with the real local model (all-MiniLM-L6-v2, a 256-token window)."""

from pathlib import Path

import pytest

from memory_app import services
from memory_app.models import MEMORY

# Eleven unrelated paragraphs, in the repository so that the test reads nothing beside the clone.
LONG_RECORD = Path(__file__).resolve().parent / "data" / "long_record.txt"


def about_3000_characters() -> str:
    return LONG_RECORD.read_text(encoding="utf-8").strip()[:3000]


@pytest.mark.model
@pytest.mark.django_db
def test_a_3000_character_memory_divides_into_nodes_that_each_fit_256_tokens(agent, settings, run_on_commit):
    from ragsite.embedding import get_embedder

    settings.EMBED_BACKEND = "local"
    embedder = get_embedder()
    assert embedder.window == 256
    text = about_3000_characters()
    assert len(text) >= 2900
    memory, nodes = run_on_commit(services.store_memory, agent=agent, text=text)
    assert nodes == {"status": "queued"}
    built = services.record_nodes(MEMORY, memory.pk)
    assert len(built) >= 2
    assert built[0].start_char == 0 and built[-1].end_char == len(text)
    for node in built:
        assert node.window == 256 and node.embedding_model == embedder.model
        own = embedder.count_tokens(text[node.start_char : node.end_char])
        assert own == node.token_count <= 256
    (hit,) = services.recall(agent=agent, query=text[built[-1].start_char :][:200], most=1)["excerpts"]
    assert hit["nodes"] == {"first": len(built) - 1, "last": len(built) - 1}


@pytest.mark.model
@pytest.mark.django_db
@pytest.mark.parametrize("seed", [0, 1], ids=["development", "held-out"])
def test_facts_planted_late_in_long_records_are_found_by_their_best_node(seed, settings):
    """bench/memory/memory_recall.py's planted corpus: 30 facts, each after 2,000-3,000 characters of
    unrelated prose, among 200 short records about other things; one paraphrased question each.

    Issue 12 asks for top-1 >= 90 %. The development facts chose the passage window; the held-out
    facts were written before any miss was read and chose nothing (docs/decisions/0026).
    """
    from bench.memory.memory_recall import HELD_OUT, THINGS, planted_corpus
    from collections_app.services.agents import create_agent

    settings.EMBED_BACKEND = "local"
    agent = create_agent(agent_id=f"planted-{seed}")[0]
    planted, distractors = planted_corpus(seed, THINGS if seed == 0 else HELD_OUT)
    ids = [services.store_memory(agent=agent, text=text)[0].pk for text, _fact, _question in planted]
    for text in distractors:
        services.store_memory(agent=agent, text=text)

    def firsts():
        hits = [
            services.recall(agent=agent, query=question, most=5)["excerpts"] for _t, _f, question in planted
        ]
        top1 = sum(bool(h) and h[0]["id"] == i for h, i in zip(hits, ids, strict=True)) / len(ids)
        quoted = sum(
            bool(h) and h[0]["id"] == i and f in h[0]["text"]
            for h, i, (_t, f, _q) in zip(hits, ids, planted, strict=True)
        ) / len(ids)
        return top1, quoted

    for memory_id in ids:  # each record's own vector, as the task its store queued makes it
        services.embed_vector(MEMORY, memory_id)
    records_only, quoted_before = firsts()
    for memory_id in ids:
        services.build_nodes(MEMORY, memory_id)
    by_node, quoted = firsts()
    # Before nodes, a record is quoted by its opening, which never holds the fact (its last sentence);
    # the words alone (weight 0.3) find some records, but only nodes find and quote the facts.
    assert quoted_before == 0 and records_only < by_node
    # Issue 12 asked for 90 %: 27 of 30 on each set, at memory's fusion weight and node-score mix
    # (conf.RECALL_FUSION_WEIGHT, conf.NODE_SCORE_MIX, calibrated on LoCoMo's dev split).
    assert by_node >= 27 / 30 and quoted == by_node, (by_node, quoted)  # and quoted by the fact's node
