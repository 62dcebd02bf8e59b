"""The six invariants of seed 002 §5, each as a test on the real database.

1. Recall ranks excerpts (DESIGN.md §6, replacing "retrieval unchanged by nodes"): every node of a
   divided record is a candidate scored by itself and its passages, a record that fits is a
   candidate whole, scored by itself; candidates go best first, and nodes of one record that touch
   are merged. A record that was never divided scores exactly what it scored before any node
   existed, so such records keep their relative order. Under MUTATION: the rule is written out
   plainly here; the real `recall` must equal it, and the older rules (one best node per record;
   nodes ignored by the ranking) must be caught on the same corpus, or the test proves nothing.
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

from memory_app import conf, services
from memory_app.models import EPISODE, MEMORY, RECORD_MODELS, Episode, Memory, NodePassages, RecordNode
from ragsite import embedding
from ragsite.fusion import hybrid_scores
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
        records.append(
            (MEMORY if n % 2 else EPISODE, "\n\n".join(paragraph(rng, topic, 30) for topic in order))
        )
    for n in range(10):
        first, second = rng.sample(names, 2)
        records.append(
            (MEMORY if n % 3 else EPISODE, paragraph(rng, first, 12) + " " + paragraph(rng, second, 8))
        )
    return records


QUERIES = [" ".join(TOPICS[topic][i : i + 3]) for topic in TOPICS for i in (0, 3, 6)]


def plain_scores(*, agent, query, passages=True):
    """Every candidate's score, written out plainly, record by record, from the database.

    A record with nodes gives one candidate per node, each scored like a record (its cosine, and
    seed 004's BM25 of its own span with the records' idf and avgdl) and as the best of itself and
    its passages, mixed with itself, its second-best passage and its record by `conf.NODE_SCORE_MIX`
    (`passages=False`: itself alone, the rule before passages). A record without
    nodes is one candidate, scored by itself. Answers those [(kind, id, node index or None, score)]
    and every record's own score {(kind, id): score}.
    """
    embedder = embedding.get_embedder()
    rows = []
    for kind, model in RECORD_MODELS.items():
        rows += [(kind, r.pk, r.text, r.vector) for r in model.objects.filter(agent=agent).order_by("pk")]
    query_vector = embedder.embed([query])[0]
    index = BM25Index.from_texts(text for _k, _id, text, _v in rows)
    query_terms = terms(query)
    upper = index.upper_bound(query_terms)

    def fused(cosine, bm25):
        return float(
            hybrid_scores(np.array([cosine]), np.array([bm25]), upper, weight=conf.RECALL_FUSION_WEIGHT)[0][0]
        )

    def bm25_of(text):  # seed 004's formula, written out, with the records' statistics
        words = terms(text)
        total = 0.0
        for term in query_terms:
            if term in index.term_ids and (tf := words.count(term)):
                norm = index.k1 * (1 - index.b + index.b * len(words) / index.avgdl)
                total += float(index.idf[index.term_ids[term]]) * tf * (index.k1 + 1) / (tf + norm)
        return total

    candidates, own = [], {}
    for kind, pk, text, vector in rows:
        own[(kind, pk)] = fused(float(vector @ query_vector), bm25_of(text))
        nodes = list(RecordNode.objects.filter(parent_kind=kind, parent_id=pk).order_by("node_index"))
        for n in nodes:
            spans = [(n.start_char, n.end_char, n.vector)]
            held = NodePassages.objects.filter(
                parent_kind=kind, parent_id=pk, node_index=n.node_index
            ).first()
            if passages and held is not None:
                vectors = (
                    np.frombuffer(bytes(held.embeddings), dtype="<f2")
                    .astype(np.float32)
                    .reshape(len(held.spans), -1)
                )
                spans += [(a, b, v) for (a, b), v in zip(held.spans, vectors, strict=True)]
            scores = [fused(float(v @ query_vector), bm25_of(text[a:b])) for a, b, v in spans]
            score = max(scores)
            if passages:  # conf.NODE_SCORE_MIX: the best, with the node itself, its 2nd passage, its record
                a, b, c = conf.NODE_SCORE_MIX
                second = sorted(scores[1:], reverse=True)[1] if len(scores) > 2 else 0.0
                score = (score + a * scores[0] + b * second + c * own[(kind, pk)]) / (1 + a + b + c)
            candidates.append((kind, pk, n.node_index, score))
        if not nodes:
            candidates.append((kind, pk, None, own[(kind, pk)]))
    return candidates, own


def plain_recall(*, agent, query, most=5, rule="excerpts"):
    """[(kind, id, score, first node, last node)] as the rule says, with a budget nothing reaches.

    rule="excerpts": candidates best first (ties by kind, id, node), a node touching an excerpt of
    its record joins it. "best node": the rule of issue 12, one excerpt per record, its best node.
    "records": nodes ignored by the ranking (seed 002 §5 as first written).
    """
    candidates, own = plain_scores(agent=agent, query=query, passages=True)
    order = {kind: n for n, kind in enumerate((MEMORY, EPISODE))}
    if rule == "best node":
        best = {}
        for kind, pk, node, score in candidates:
            if (kind, pk) not in best or score > best[(kind, pk)][3]:
                best[(kind, pk)] = (kind, pk, node, score)
        candidates = list(best.values())
    elif rule == "records":
        candidates = [(kind, pk, None, score) for (kind, pk), score in own.items()]
    candidates.sort(key=lambda c: (-c[3], order[c[0]], c[1], -1 if c[2] is None else c[2]))
    held = []
    for kind, pk, node, score in candidates:
        if score <= 0 or len(held) >= most:
            break
        touching = [
            e
            for e in held
            if e[0] == kind and e[1] == pk and node is not None and (e[3] - 1 <= node <= e[4] + 1)
        ]
        if not touching:
            held.append([kind, pk, score, node, node])
            continue
        keep = touching[0]
        for other in touching[1:]:
            keep[3], keep[4] = min(keep[3], other[3]), max(keep[4], other[4])
            held.remove(other)
        keep[3], keep[4] = min(keep[3], node), max(keep[4], node)
    return [
        (kind, pk, pytest.approx(round(score, 6), abs=2e-6), first, last)
        for kind, pk, score, first, last in held
    ]


def shown(answer):
    return [
        (
            e["kind"],
            e["id"],
            e["score"],
            *((e["nodes"]["first"], e["nodes"]["last"]) if isinstance(e["nodes"], dict) else (None, None)),
        )
        for e in answer["excerpts"]
    ]


def test_invariant_1_recall_ranks_excerpts_under_mutation(agent, django_capture_on_commit_callbacks):
    rng = random.Random(2)
    with django_capture_on_commit_callbacks() as queued:  # stored, nodes not yet built
        for kind, text in corpus(rng):
            (services.store_memory if kind == MEMORY else services.archive_episode)(agent=agent, text=text)
    for task in queued:  # the records' own vectors first: nodes are what this compares
        if "_queue_vector" in task.__qualname__:
            task()
    before = {
        query: services.recall(agent=agent, query=query, most=18, max_chars=100_000) for query in QUERIES
    }
    for task in queued:
        if "_queue_nodes" in task.__qualname__:
            task()
    assert RecordNode.objects.values("parent_kind", "parent_id").distinct().count() == 8
    changed_by_best_node = changed_by_records = several = 0
    for query in QUERIES:
        real = services.recall(agent=agent, query=query, most=24, max_chars=100_000)
        assert real["excerpts"] and not real["cut"], query
        assert shown(real) == plain_recall(agent=agent, query=query, most=24)
        changed_by_best_node += shown(real) != plain_recall(
            agent=agent, query=query, most=24, rule="best node"
        )
        changed_by_records += shown(real) != plain_recall(agent=agent, query=query, most=24, rule="records")
    # A question about two topics finds two paragraphs of a record, apart: several excerpts of it.
    for first, second in zip(QUERIES, QUERIES[3:], strict=False):
        asked = services.recall(agent=agent, query=f"{first} {second}", most=8)["excerpts"]
        keys = [(e["kind"], e["id"]) for e in asked]
        several += len(keys) > len(set(keys))
    # The older rules give other answers on this corpus, and records do give several excerpts.
    assert changed_by_best_node >= 3 and changed_by_records >= 3 and several >= 3, (
        changed_by_best_node,
        changed_by_records,
        several,
    )
    # A record that was never divided scores what it scored before any node existed, so records
    # never divided keep their relative order.
    divided = set(RecordNode.objects.values_list("parent_kind", "parent_id"))
    for query in QUERIES:
        after = services.recall(agent=agent, query=query, most=50, max_chars=100_000)["excerpts"]
        whole_after = [(e["kind"], e["id"], e["score"]) for e in after if (e["kind"], e["id"]) not in divided]
        whole_before = [
            (e["kind"], e["id"], e["score"])
            for e in before[query]["excerpts"]
            if (e["kind"], e["id"]) not in divided
        ]
        assert whole_after[: len(whole_before)] == whole_before


def test_invariant_1_excerpts_come_from_nodes_once_built(agent, run_on_commit):
    rng = random.Random(5)
    text = "\n\n".join(paragraph(rng, topic, 30) for topic in ("sea", "kitchen", "sky", "chess"))
    memory, _ = run_on_commit(services.store_memory, agent=agent, text=text)
    hit = services.recall(agent=agent, query="nebula comet telescope quasar", most=1)["excerpts"][0]
    nodes = services.record_nodes(MEMORY, memory.pk)
    chosen = nodes[hit["nodes"]["first"]]
    assert hit["nodes"]["last"] == hit["nodes"]["first"]
    assert hit["text"] == text[chosen.start_char : chosen.end_char].strip()
    assert "nebula" in hit["text"] or "comet" in hit["text"]
    assert hit["start"] > 0  # the sky paragraph is the third: not the opening


def snapshot(record_class, pk):
    return (
        record_class.objects.filter(pk=pk)
        .values("text", "token_count", "embedding", "embedding_model", "locked", "created_at", "updated_at")
        .get()
    )


def test_invariant_2_building_rebuilding_or_deleting_nodes_never_modifies_the_record(agent, monkeypatch):
    memory, _ = services.store_memory(agent=agent, text=prose(300, seed=8))
    episode, _ = services.archive_episode(agent=agent, text=prose(300, seed=9))
    Episode.objects.filter(pk=episode.pk).update(locked=True)
    for record in (memory, episode):  # their vectors, as the tasks their stores queued would make them
        assert services.embed_vector(record.KIND, record.pk).status == "built"
    before = {
        (Memory, memory.pk): snapshot(Memory, memory.pk),
        (Episode, episode.pk): snapshot(Episode, episode.pk),
    }

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


def test_invariants_3_4_5_every_stored_node_fits_partitions_its_parent_and_repeats(
    agent, run_on_commit, embedder
):
    for seed, words in enumerate((60, 200, 777, 1500)):
        text = prose(words, seed=seed)
        memory, _ = run_on_commit(services.store_memory, agent=agent, text=text)
        nodes = services.record_nodes(MEMORY, memory.pk)
        assert len(nodes) >= 2
        # 3: counted on the node's own span
        for node in nodes:
            assert (
                embedder.count_tokens(text[node.start_char : node.end_char])
                == node.token_count
                <= node.window
            )
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
