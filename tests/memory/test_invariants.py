"""The six invariants of seed 002 §5, each as a test on the real database.

1. Retrieval is unchanged by nodes, under MUTATION: the same test is run against the real
   `recall` and against `recall_with_nodes_as_candidates`, a deliberately wrong recall that lets
   a record's best node into the vector search. The real one must pass and the mutant must be
   caught, or the test proves nothing.
2. Stored records are not modified by building, rebuilding or deleting nodes.
3. Every node's token_count is at most its window, counted on the node's own span.
4. Nodes partition their parent.
5. Division is deterministic.
6. No stale node survives a delete or a text change of its parent.
"""

import random
from itertools import pairwise

import numpy as np
import pytest

from memory_app import services
from memory_app.models import EPISODE, MEMORY, RECORD_MODELS, Episode, Memory, RecordNode
from ragsite import embedding
from ragsite.fusion import DEFAULT_WEIGHT, hybrid_scores
from ragsite.lexical import BM25Index, terms

from .conftest import prose

pytestmark = pytest.mark.django_db

TOPICS = {
    "sky": "nebula comet orbit telescope eclipse quasar meteor zenith aurora galaxy".split(),
    "sea": "harbor anchor keel tide mast rudder lagoon reef sail buoy".split(),
    "kitchen": "pepper saffron skillet dough simmer ladle basil whisk broth oven".split(),
    "garden": "trellis compost seedling mulch pruning orchard tulip hedge fern shovel".split(),
    "chess": "gambit bishop rook castling endgame pawn knight checkmate opening tempo".split(),
}
FILLER = "the a of and to in that it with as for on was by at from this".split()


def paragraph(rng: random.Random, topic: str, words: int) -> str:
    vocabulary = TOPICS[topic] + FILLER
    sentences, count = [], 0
    while count < words:
        length = rng.randint(6, 10)
        sentences.append(" ".join(rng.choice(vocabulary) for _ in range(length)).capitalize() + ".")
        count += length
    return " ".join(sentences)


def corpus(rng: random.Random) -> list[tuple[str, str]]:
    """(kind, text): long records made of single-topic paragraphs, and short mixed ones."""
    records = []
    names = list(TOPICS)
    for n in range(8):
        order = rng.sample(names, 4)
        records.append((MEMORY if n % 2 else EPISODE, "\n\n".join(paragraph(rng, topic, 30) for topic in order)))
    for n in range(10):
        first, second = rng.sample(names, 2)
        records.append((MEMORY if n % 3 else EPISODE, paragraph(rng, first, 12) + " " + paragraph(rng, second, 8)))
    return records


QUERIES = [" ".join(TOPICS[topic][i : i + 3]) for topic in TOPICS for i in (0, 3, 6)]


def recall_with_nodes_as_candidates(*, agent, query, most=5):
    """WRONG ON PURPOSE: a record's vector score is the best of its own and its nodes' cosines.

    This is "nodes as search candidates" (seed 002 §7), which the design keeps out of this step.
    It must make invariant 1's test fail.
    """
    embedder = embedding.get_embedder()
    rows = []
    for kind, model in RECORD_MODELS.items():
        rows += [(kind, r.pk, r.text, r.vector) for r in model.objects.filter(agent=agent).order_by("pk")]
    query_vector = embedder.embed([query])[0]
    index = BM25Index.from_texts(text for _k, _id, text, _v in rows)
    cosine = np.array([float(vector @ query_vector) for *_rest, vector in rows])
    for row, (kind, pk, _text, _vector) in enumerate(rows):
        for node in RecordNode.objects.filter(parent_kind=kind, parent_id=pk):
            cosine[row] = max(cosine[row], float(node.vector @ query_vector))
    query_terms = terms(query)
    scores, _ = hybrid_scores(cosine, index.scores(query_terms), index.upper_bound(query_terms), weight=DEFAULT_WEIGHT)
    order = sorted(range(len(rows)), key=lambda row: (-scores[row], rows[row][0], rows[row][1]))
    return [{"kind": rows[row][0], "id": rows[row][1]} for row in order if scores[row] > 0][:most]


def ranking(recall, agent, query):
    return [(item["kind"], item["id"]) for item in recall(agent=agent, query=query, most=8)]


@pytest.mark.parametrize(
    ("recall", "must_detect_change"),
    [(services.recall, False), (recall_with_nodes_as_candidates, True)],
    ids=["real-recall", "mutant-nodes-in-vector-search"],
)
def test_invariant_1_recall_returns_the_same_records_in_the_same_order_with_or_without_nodes(
    agent, django_capture_on_commit_callbacks, recall, must_detect_change
):
    rng = random.Random(2)
    with django_capture_on_commit_callbacks() as queued:  # stored, nodes not yet built
        stored = [
            (services.store_memory if kind == MEMORY else services.archive_episode)(agent=agent, text=text)
            for kind, text in corpus(rng)
        ]
    assert RecordNode.objects.count() == 0
    without_nodes = {query: ranking(recall, agent, query) for query in QUERIES}

    for build in queued:
        build()
    divided = {(r.KIND, r.pk) for r, _ in stored if RecordNode.objects.filter(parent_kind=r.KIND, parent_id=r.pk)}
    assert len(divided) == 8
    with_nodes = {query: ranking(recall, agent, query) for query in QUERIES}

    assert all(without_nodes[q] for q in QUERIES)
    changed = [q for q in QUERIES if with_nodes[q] != without_nodes[q]]
    if must_detect_change:
        assert changed, "the mutant admitted nodes into the ranking and the test did not notice"
    else:
        assert changed == []


def test_invariant_1_excerpts_come_from_nodes_once_built(agent, run_on_commit):
    rng = random.Random(5)
    text = "\n\n".join(paragraph(rng, topic, 30) for topic in ("sea", "kitchen", "sky", "chess"))
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=text)
    (hit,) = services.recall(agent=agent, query="nebula comet telescope quasar", most=5)
    nodes = services.record_nodes(MEMORY, memory.pk)
    chosen = nodes[hit["excerpt"]["node_index"]]
    assert hit["excerpt"]["text"] == text[chosen.start_char : chosen.end_char]
    assert "nebula" in hit["excerpt"]["text"] or "comet" in hit["excerpt"]["text"]
    assert hit["excerpt"]["start"] > 0  # the sky paragraph is the third: not the opening


def snapshot(record_class, pk):
    return record_class.objects.filter(pk=pk).values(
        "text", "token_count", "embedding", "embedding_model", "locked", "created_at", "updated_at"
    ).get()


def test_invariant_2_building_rebuilding_or_deleting_nodes_never_modifies_the_record(agent, monkeypatch):
    memory, _ = services.store_memory(agent=agent, text=prose(300, seed=8))
    episode, _ = services.archive_episode(agent=agent, text=prose(300, seed=9))
    Episode.objects.filter(pk=episode.pk).update(locked=True)
    before = {(Memory, memory.pk): snapshot(Memory, memory.pk), (Episode, episode.pk): snapshot(Episode, episode.pk)}

    def unchanged():
        return all(snapshot(model, pk) == state for (model, pk), state in before.items())

    assert services.build_nodes(MEMORY, memory.pk).status == "built"
    assert services.build_nodes(EPISODE, episode.pk).status == "built"  # locked: nodes still built
    assert unchanged()
    # Rebuild: the nodes now look like another model's, so the repair replaces them.
    RecordNode.objects.update(embedding_model="an-older-model")
    report = services.check_health(repair=True)
    assert {item["status"] for item in report["repaired"]} == {"built"}
    assert unchanged()
    RecordNode.objects.all().delete()
    assert unchanged()


def test_invariants_3_4_5_every_stored_node_fits_partitions_its_parent_and_repeats(agent, run_on_commit, embedder):
    for seed, words in enumerate((60, 200, 777, 1500)):
        text = prose(words, seed=seed)
        memory, _ = run_on_commit(services.store_memory, agent=agent, text=text)
        nodes = services.record_nodes(MEMORY, memory.pk)
        assert len(nodes) >= 2
        # 3: counted on the node's own span
        for node in nodes:
            assert embedder.count_tokens(text[node.start_char : node.end_char]) == node.token_count <= node.window
        # 4: sorted by node_index, from 0 to the end, without gap or overlap
        assert [n.node_index for n in nodes] == list(range(len(nodes)))
        assert nodes[0].start_char == 0 and nodes[-1].end_char == len(text)
        assert all(a.end_char == b.start_char for a, b in pairwise(nodes))
        # 5: building again from nothing gives the same nodes
        offsets = [(n.start_char, n.end_char, n.token_count) for n in nodes]
        RecordNode.objects.filter(parent_kind=MEMORY, parent_id=memory.pk).delete()
        services.build_nodes(MEMORY, memory.pk)
        again = services.record_nodes(MEMORY, memory.pk)
        assert [(n.start_char, n.end_char, n.token_count) for n in again] == offsets
        assert [bytes(n.embedding) for n in again] == [bytes(n.embedding) for n in nodes]


def test_invariant_6_no_stale_node_survives_a_delete_or_a_text_change(agent, run_on_commit):
    kept, _ = run_on_commit(services.store_memory, agent=agent, text=prose(200, seed=1))
    deleted, _ = run_on_commit(services.store_memory, agent=agent, text=prose(200, seed=2))
    changed, _ = run_on_commit(services.archive_episode, agent=agent, text=prose(200, seed=3))
    kept_nodes = [(n.start_char, n.end_char) for n in services.record_nodes(MEMORY, kept.pk)]

    services.delete_record(agent=agent, kind=MEMORY, id=deleted.pk)
    new_text = prose(90, seed=4)
    run_on_commit(services.update_text, agent=agent, kind=EPISODE, id=changed.pk, text=new_text)

    assert services.record_nodes(MEMORY, deleted.pk) == []
    rebuilt = services.record_nodes(EPISODE, changed.pk)
    assert rebuilt and rebuilt[-1].end_char == len(new_text)  # only nodes of the new text
    assert [(n.start_char, n.end_char) for n in services.record_nodes(MEMORY, kept.pk)] == kept_nodes
    # Every node left points at a record that exists and lies within its text.
    for node in RecordNode.objects.all():
        parent = RECORD_MODELS[node.parent_kind].objects.get(pk=node.parent_id)
        assert node.end_char <= len(parent.text)
