"""Issue 15: what a reader is answered, scores included, never depends on the text of a paragraph it may
not read — also through the structure strategy's overlap, which copies the end of a (hidden) piece into
the next (readable) one. Built and searched end to end with the `hash` embedder (tests/conftest.py)."""

import shutil

import numpy as np
import pytest

from collections_app.index.vector_codec import decode
from collections_app.models import BuildRun, CollectionBuilt, Document, IndexFile, Label, Paragraph
from collections_app.services import indexes
from collections_app.services.agents import create_collection, create_reader
from collections_app.services.builds import build_collection
from collections_app.services.search import forget_index, search_collection
from collections_app.text.context import embedding_text
from collections_app.text.stitch import carried_openings, fresh_text
from collections_app.text.windows import embed_in_windows
from ragsite import embedding
from tests.conftest import HANDBOOK

pytestmark = pytest.mark.django_db

SECRET = "The acquisition target is Hooli at ninety million dollars. "
# The same shape letter for letter (the chunker cuts both alike), none of the question's words.
DISGUISED = "Xyz qwmbvtyzeub kfpvxs gr Jbrwk fe ztwpel pyqqebj drgmwpp. "
assert len(SECRET) == len(DISGUISED)
QUESTIONS = [
    "Hooli acquisition target ninety million",
    "travel expenses Hooli",
    "annual leave",
    "ninety days",
]


def memo(secret: str) -> str:
    return (
        "# Board memo\n\n"
        + "Public opening words about annual leave. " * 6
        + secret
        + "Public closing words about travel and expenses follow here. " * 6
    )


def board(agent, knowledge_folder, name: str, secret: str):
    """A per-reader collection whose memo holds ``secret`` in pieces labelled `secret` (its own text only)."""
    collection = create_collection(
        agent=agent, name=name, method="structure", size=220, overlap=150, per_reader=True
    )
    knowledge_folder(name, {**HANDBOOK, "memo.md": memo(secret)})
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    at = memo(secret).index(secret)
    label = Label.objects.get_or_create(name="secret")[0]
    pieces = list(
        Paragraph.objects.filter(collection=collection, document__name="memo.md").order_by("ordinal")
    )
    reach = 0
    for piece in pieces:
        # The part of the piece no earlier piece holds: label it when the secret sentence is in it.
        own_start = max(piece.start_char, reach)
        if own_start < at + len(secret) and piece.end_char > at:
            piece.labels.add(label)
        reach = max(reach, piece.end_char)
    return collection


def answers(agent, collection, **kwargs):
    return [
        search_collection(
            agent=agent,
            collection=collection,
            question=question,
            reader="bob",
            most=50,
            min_score=0,
            mode=mode,
            **kwargs,
        )
        for mode in ("lexical", "hybrid", "vector")
        for question in QUESTIONS
    ]


@pytest.fixture
def boards(agent, knowledge_folder):
    create_reader(external_id="bob", labels=["staff"])
    told = board(agent, knowledge_folder, "told", SECRET)
    other = board(agent, knowledge_folder, "other", DISGUISED)
    hidden = list(
        Paragraph.objects.filter(collection=told, labels__name="secret").values_list("index", flat=True)
    )
    assert hidden and hidden == list(
        Paragraph.objects.filter(collection=other, labels__name="secret").values_list("index", flat=True)
    )
    # The overlap did copy the secret's tail into the next, readable, piece.
    after = Paragraph.objects.get(collection=told, document__name="memo.md", index=max(hidden) + 1)
    assert "Hooli" in after.text and not after.labels.exists()
    return told, other


def test_every_readable_rows_score_is_the_same_whatever_the_hidden_paragraphs_say(agent, boards):
    """Lexical, hybrid and vector answers (every readable paragraph, unfloored) are identical, scores
    and texts, whether the hidden piece holds the question's words or others in their place."""
    told, other = boards
    for around in (0, 1):
        with_words = answers(agent, told, around=around)
        without = answers(agent, other, around=around)
        assert with_words == without
    texts = " ".join(p["text"] for answer in with_words for p in answer["paragraphs"])
    assert "Hooli" not in texts and "travel" in texts
    # The cut is this reader's: one who may read the hidden piece scores the copy in the next one.
    create_reader(external_id="carol", labels=["secret"])
    answer = search_collection(
        agent=agent,
        collection=told,
        question="Hooli",
        reader="carol",
        mode="lexical",
        most=5,
        min_score=0,
        around=0,
    )
    found = [p for p in answer["paragraphs"] if "Hooli" in p["text"]]
    assert len(found) >= 2 and all(p["score"] > 0 for p in found)  # the piece, and the one carrying its tail


def test_a_paragraph_is_embedded_from_the_end_of_what_it_shares_with_earlier_ones(agent, boards):
    told, _other = boards
    embedder = embedding.get_embedder()
    rows = list(Paragraph.objects.filter(collection=told).order_by("ordinal"))
    openings = carried_openings((r.document_id, r.start_char, r.end_char) for r in rows)
    carrying = 0
    for row, (carried, _first) in zip(rows, openings, strict=True):
        blob, _tokens = embed_in_windows(
            [embedding_text(fresh_text(row.text, carried), row.context)], embedder
        )
        assert np.allclose(decode(row.embedding, 64), decode(blob[0], 64))
        carrying += carried > 0
    assert carrying >= 3


def _embed_whole_texts(collection):
    """What a build before CONTEXT_VERSION 2 stored: each paragraph's vector over its whole text."""
    embedder = embedding.get_embedder()
    for row in Paragraph.objects.filter(collection=collection):
        row.embedding = embed_in_windows([embedding_text(row.text, row.context)], embedder)[0][0]
        row.save(update_fields=["embedding"])
    Document.objects.filter(collection=collection).update(built_context=1)
    IndexFile.objects.filter(collection=collection).delete()  # nor did such a build store its index files
    forget_index(collection.pk)
    shutil.rmtree(indexes.collection_root(collection.pk), ignore_errors=True)


def test_over_vectors_embedded_before_the_change_readers_scores_still_ignore_hidden_text(agent, boards):
    """An upgraded store's vectors still hold the copied text until a rebuild: the index says so, and a
    row that shares text with a hidden one is ranked without its cosine meanwhile. The next build
    re-embeds exactly the paragraphs that carry text, once."""
    told, other = boards
    for collection in boards:
        _embed_whole_texts(collection)
    # explain (the admin's playground) shows each piece's parts: the same rule holds there (the
    # paragraphs' database ids aside, which differ between two collections anyway).
    explained = [
        [
            [
                {k: v for k, v in part.items() if k != "paragraph"}
                for piece in answer["explain"]["pieces"]
                for part in piece
            ]
        ]
        for collection in boards
        for answer in answers(agent, collection, around=1, explain=True)
    ]
    half = len(explained) // 2
    assert explained[:half] == explained[half:]
    built = CollectionBuilt.objects.get(collection=told)
    assert indexes.mapped_index(told, built)[1].meta["fresh_vectors"] is False

    rows = Paragraph.objects.filter(collection=told).order_by("ordinal")
    carrying = sum(
        n > 0 for n, _f in carried_openings(rows.values_list("document_id", "start_char", "end_char"))
    )
    run = build_collection(collection=told)
    assert run.status == BuildRun.SUCCEEDED and run.documents_read == len(HANDBOOK) + 1
    assert run.paragraphs_embedded == carrying  # the rest kept the vectors they had: the same text
    built = CollectionBuilt.objects.get(collection=told)
    assert indexes.mapped_index(told, built)[1].meta["fresh_vectors"] is True
    assert build_collection(collection=told).paragraphs_embedded == 0


def test_the_reranker_reads_a_row_less_what_it_shares_with_a_hidden_one(agent, boards, settings):
    """The reranker orders the answer: it is sent each candidate as the reader would be shown it."""
    from tests.servers import RerankServer, serving

    told, other = boards
    with serving(RerankServer(favourite="hooli")) as server:
        settings.RERANK_URL, settings.RERANK_MODEL, settings.RERANK_TIMEOUT = (
            server.url + "/v1/rerank",
            "r",
            2.0,
        )
        ranked = [
            search_collection(
                agent=agent,
                collection=collection,
                question="Hooli travel",
                reader="bob",
                most=5,
                min_score=0,
                around=0,
            )
            for collection in (told, other)
        ]
    sent = " ".join(text for request in server.requests for text in request["body"]["documents"])
    assert server.requests and "Hooli" not in sent and "travel" in sent
    assert ranked[0]["rerank"]["status"] == "reranked" and ranked[0] == ranked[1]
