"""A reader's view across the whole carried span, ids and stitching (issue 24, items 2-4)."""

import pytest

from collections_app.models import Label, Paragraph
from collections_app.services.agents import create_collection, create_reader
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection

pytestmark = pytest.mark.django_db

PLANS = ("The codename covers the Hooli merger and the SECRETSALARY bands rise by ninety million. "
         + " ".join(f"Public note {word} says the canteen opens at eight on weekdays."
                    for word in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel",
                                 "india", "juliet", "kilo", "lima")))


def test_an_overlap_wider_than_three_pieces_never_returns_hidden_text(agent, knowledge_folder):
    """The review's F6: size 400, overlap 390, so pieces 1 to 4 and beyond all carry piece 0's text."""
    collection = create_collection(agent=agent, name="reach", method="structure", size=400, overlap=390,
                                   per_reader=True)
    knowledge_folder("reach", {"plans.md": PLANS})
    build_collection(collection=collection)
    rows = list(Paragraph.objects.filter(collection=collection).order_by("ordinal"))
    assert sum("SECRETSALARY" in row.text for row in rows) > 4  # the secret is carried past three pieces
    secret, public = Label.objects.create(name="secret"), Label.objects.create(name="pub")
    rows[0].labels.add(secret)
    for row in rows[1:]:
        row.labels.add(public)
    create_reader(external_id="alice", labels=["pub"])
    for question in ("Hooli merger SECRETSALARY ninety million", "canteen opens", "public note golf"):
        for around in (0, 1, 3):
            answer = search_collection(agent=agent, collection=collection, question=question, reader="alice",
                                       min_score=0, most=50, around=around)
            assert answer["paragraphs"]
            for paragraph in answer["paragraphs"]:
                assert not {"Hooli", "SECRETSALARY", "ninety"} & set(paragraph["text"].split()), paragraph
