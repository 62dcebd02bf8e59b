"""bench/scale/scale_store.py: the rows its executemany writes are the rows the ORM would have written."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "scale"))
import scale_store  # noqa: E402

from collections_app.index.vector_codec import encode  # noqa: E402
from collections_app.interchange import fingerprint  # noqa: E402
from collections_app.models import Document, Paragraph  # noqa: E402
from collections_app.services.agents import create_agent, create_collection  # noqa: E402
from collections_app.text.stitch import carried_openings  # noqa: E402

pytestmark = pytest.mark.django_db

CORPUS = ["Alpha beta gamma.", "Delta epsilon."]  # shorter than n: the third row gets pseudo-words


def _documents(agent, name):
    collection = create_collection(agent=agent, name=name, method="fixed", size=4000)
    document = Document.objects.create(
        collection=collection, name="d0000000.md", paragraph_count=3, built_method="fixed", built_model="m"
    )
    return collection, [document]


def _stored(collection):
    rows = Paragraph.objects.filter(collection=collection).order_by("ordinal").values()
    return [
        {
            k: (bytes(v) if isinstance(v, memoryview) else v)
            for k, v in row.items()
            if k not in ("id", "collection_id", "document_id")
        }
        for row in rows
    ]


def test_inserted_rows_equal_the_orm_rows_of_the_same_values():
    agent = create_agent(agent_id="scale")[0]
    fast, fast_documents = _documents(agent, "fast")
    orm, orm_documents = _documents(agent, "orm")
    scale_store.insert_paragraphs(
        agent_id=agent.agent_id, collection=fast, documents=fast_documents, n=3, corpus=CORPUS
    )
    vectors = scale_store.Mixture(3).draw(3)
    words = np.random.default_rng(3).integers(0, 100_000, 12)
    texts = [scale_store.paragraph_text(j, CORPUS, words) for j in range(3)]
    starts = [0, len(texts[0]) + 2, len(texts[0]) + len(texts[1]) + 4]  # "\n\n" between paragraphs
    Paragraph.objects.bulk_create(
        [
            Paragraph(
                agent_id=agent.agent_id,
                collection=orm,
                document=orm_documents[0],
                ordinal=j,
                index=j,
                text=text,
                start_char=starts[j],
                end_char=starts[j] + len(text),
                token_count=None,
                fingerprint=fingerprint(text),
                embedding=encode(vectors[j]),
            )
            for j, text in enumerate(texts)
        ]
    )

    assert _stored(fast) == _stored(orm)
    assert texts[2].startswith(CORPUS[0] + " zq")  # the second pass over the corpus differs
    assert [p.document_id for p in Paragraph.objects.filter(collection=fast)] == [fast_documents[0].pk] * 3


def test_a_documents_rows_share_no_text_so_the_index_carries_none():
    agent = create_agent(agent_id="scale")[0]
    collection = create_collection(agent=agent, name="fast", method="fixed", size=4000)
    documents = [
        Document.objects.create(
            collection=collection,
            name=f"d{d:07d}.md",
            paragraph_count=10,
            built_method="fixed",
            built_model="m",
        )
        for d in range(2)
    ]
    scale_store.insert_paragraphs(
        agent_id=agent.agent_id, collection=collection, documents=documents, n=20, corpus=CORPUS
    )
    positions = (
        Paragraph.objects.filter(collection=collection)
        .order_by("ordinal")
        .values_list("document_id", "start_char", "end_char")
    )

    assert [carried for carried, _first in carried_openings(positions)] == [0] * 20
    assert [start for _doc, start, _end in positions][:2] == [0, len(CORPUS[0]) + 2]
    assert positions[10][1] == 0  # the second document starts again at 0


def test_questions_are_drawn_near_the_stores_rows_without_moving_the_stores_draws():
    """search_scale's questions come from the store's own clusters (another generator), so each one sits
    in a cluster of rows; a mixture with another seed puts them near no row (the 'far' questions)."""
    n = 400
    rows = scale_store.Mixture(n).draw(n)
    mixture = scale_store.Mixture(n)
    questions = mixture.draw(50, rng=np.random.default_rng(11))
    assert np.array_equal(mixture.draw(n), rows)  # the question draws did not move the store's
    near = (questions @ rows.T).max(axis=1)
    far = (scale_store.Mixture(n, seed=11).draw(50) @ rows.T).max(axis=1)
    assert np.median(near) > np.median(far) + 0.2
