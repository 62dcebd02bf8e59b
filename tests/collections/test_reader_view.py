"""A reader's view across the whole carried span, ids and stitching (issue 24, items 2-4)."""

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collections_app.models import CollectionBuilt, Label, Paragraph
from collections_app.services.agents import create_collection, create_reader
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection

pytestmark = pytest.mark.django_db

# One long sentence: a piece starts at a sentence when one begins in its overlap, so only text with
# no sentence start in reach is carried whole from piece to piece.
PLANS = (
    "The codename covers the Hooli merger and the SECRETSALARY bands rise by ninety million; "
    + "; ".join(
        f"public note {word} says the canteen opens at eight on weekdays"
        for word in (
            "alpha",
            "bravo",
            "charlie",
            "delta",
            "echo",
            "foxtrot",
            "golf",
            "hotel",
            "india",
            "juliet",
            "kilo",
            "lima",
        )
    )
    + "."
)


def test_an_overlap_wider_than_three_pieces_never_returns_hidden_text(agent, knowledge_folder):
    """The review's F6: size 400, overlap 390, so pieces 1 to 4 and beyond all carry piece 0's text."""
    collection = create_collection(
        agent=agent, name="reach", method="structure", size=400, overlap=390, per_reader=True
    )
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
            answer = search_collection(
                agent=agent,
                collection=collection,
                question=question,
                reader="alice",
                min_score=0,
                most=50,
                around=around,
            )
            assert answer["paragraphs"]
            for paragraph in answer["paragraphs"]:
                assert not {"Hooli", "SECRETSALARY", "ninety"} & set(paragraph["text"].split()), paragraph


WORDS = [
    "apple",
    "birch",
    "cedar",
    "delta",
    "ember",
    "fjord",
    "grove",
    "heron",
    "inlet",
    "juniper",
    "kelp",
    "larch",
]


def paragraph(n: int) -> str:
    return f"Paragraph {WORDS[n]} tells of the {WORDS[n]} policy and the shared leave rules for staff."


def ask_both(agent, hidden_one, twin, question, around):
    kwargs = {
        "agent": agent,
        "question": question,
        "reader": "alice",
        "min_score": 0,
        "most": 50,
        "around": around,
    }
    return search_collection(collection=hidden_one, **kwargs), search_collection(collection=twin, **kwargs)


def other(n: int) -> str:
    """What a hidden paragraph says instead, in the twin that swaps hidden text (other words, length)."""
    return f"Paragraph {WORDS[n]}-x names the payroll secret of the board and the {WORDS[n]} merger fund."


def delete_rows(collection, rows) -> None:
    """Delete stored paragraphs and move the build record on: the next search maps an index without them."""
    Paragraph.objects.filter(pk__in=[row.pk for row in rows]).delete()
    built = CollectionBuilt.objects.get(collection=collection)
    built.passages -= len(rows)
    built.built_at += timedelta(seconds=1)
    built.save(update_fields=["passages", "built_at"])


@pytest.fixture
def twins(agent, knowledge_folder):
    """Make a per-reader collection with some paragraphs hidden from alice, and its twin.

    The twin (``swap`` False) is the same collection with the hidden paragraphs deleted (DESIGN.md §5:
    the gap they leave is in its source text too, so both answers mark it alike); with ``swap`` it
    holds them, hidden alike, saying something else: the reader's answer may depend on neither
    their place (overlap 0: a twin without them cuts the same pieces) nor their text (any overlap).
    """
    made = iter(range(1000))
    create_reader(external_id="alice", labels=["pub"])
    public, secret = Label.objects.get_or_create(name="pub")[0], Label.objects.get_or_create(name="secret")[0]

    def make(hidden: set[int], count: int, overlap: int = 0, swap: bool = False):
        n = next(made)
        texts = [paragraph(i) for i in range(count)]
        swapped = [other(i) if i in hidden else texts[i] for i in range(count)]
        pair = []
        for name, body, hides in (
            (f"x{n}", texts, hidden),
            (f"y{n}", swapped, hidden) if swap else (f"y{n}", texts, set()),
        ):
            collection = create_collection(
                agent=agent, name=name, method="structure", size=120, overlap=overlap, per_reader=True
            )
            knowledge_folder(name, {"doc.md": "\n\n".join(body) + "\n"})
            build_collection(collection=collection)
            rows = list(Paragraph.objects.filter(collection=collection).order_by("ordinal"))
            assert len(rows) == len(body)  # one piece a paragraph (plus what it carries)
            for i, row in enumerate(rows):
                row.labels.add(secret if i in hides else public)
            if not swap and name.startswith("y") and hidden:
                delete_rows(collection, [rows[i] for i in hidden])
            pair.append(collection)
        return pair

    return make


def shown(paragraphs: list[dict]) -> list[tuple]:
    """What a reader is shown, scores aside (and so order, and which hit a run cites as `chunk_id`):
    each paragraph's text, passages, ids and positions."""
    return sorted(
        (p["text"], p["passages"], tuple(p["chunk_ids"]), p["first"], p["last"]) for p in paragraphs
    )


HIDDEN = st.sets(st.integers(0, 7), max_size=5)
AROUND = st.integers(0, 3)
QUESTION = st.sampled_from(["birch policy", "ember fjord grove", "heron inlet", "apple kelp larch"])


@given(hidden=HIDDEN, around=AROUND, question=QUESTION)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_readers_paragraphs_are_those_of_the_collection_without_its_hidden_ones(
    agent, twins, hidden, around, question
):
    """Issue 24, items 2 and 3: texts, passages, chunk ids and first/last equal the twin's, so neither a
    run stopping early nor an id's number tells where a hidden paragraph sits."""
    hidden_one, twin = twins(hidden, 8)
    mine, theirs = ask_both(agent, hidden_one, twin, question, around)
    assert shown(mine["paragraphs"]) == shown(theirs["paragraphs"])


@given(hidden=HIDDEN, around=AROUND, question=QUESTION)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_readers_scores_and_order_are_those_of_the_collection_without_its_hidden_ones(
    agent, twins, hidden, around, question
):
    """The whole answer (every field of every paragraph, in order, and the answer's own fields) equals
    the twin's. Found by this test: a document's title read from its first line (a hidden paragraph)
    was part of every paragraph's context, so of its vector and lexical score (context.contexts_for)."""
    hidden_one, twin = twins(hidden, 8)
    mine, theirs = ask_both(agent, hidden_one, twin, question, around)
    assert mine == theirs


@given(
    hidden=HIDDEN,
    around=AROUND,
    question=st.sampled_from(["birch policy", "heron inlet", "payroll secret board merger", "apple kelp"]),
    overlap_tenths=st.integers(0, 9),
)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_readers_whole_answer_is_the_same_whatever_its_hidden_paragraphs_say(
    agent, twins, hidden, around, question, overlap_tenths
):
    """Issue 24, item 3 with overlaps up to 90 % of the size: pieces carry the end of the one before,
    so a twin without the hidden paragraphs would cut other pieces; instead the twin says other things
    in them (other words, another length). Nothing a reader is answered, texts, scores, ids, order,
    passages, positions, may change with what they cannot read."""
    hidden_one, twin = twins(hidden, 8, overlap=12 * overlap_tenths, swap=True)
    mine, theirs = ask_both(agent, hidden_one, twin, question, around)
    assert mine == theirs


def test_ids_count_the_readers_paragraphs_and_runs_step_over_hidden_ones(agent, twins):
    """The review's F3 and F5: alice's ids were #0, #2, #4, #5, #7, #8 around three hidden paragraphs."""
    hidden_one, twin = twins({1, 3, 6}, 9)
    mine, _ = ask_both(agent, hidden_one, twin, "apple birch cedar delta ember fjord grove heron inlet", 0)
    assert sorted(p["chunk_id"] for p in mine["paragraphs"]) == [f"doc.md#{k}" for k in range(6)]
    # One hit with around 1: its readable neighbour is stitched in across the hidden paragraph.
    [alone] = search_collection(
        agent=agent,
        collection=hidden_one,
        question="apple policy",
        reader="alice",
        min_score=0,
        most=1,
        around=1,
    )["paragraphs"]
    assert alone["passages"] == 2 and alone["chunk_ids"] == ["doc.md#0", "doc.md#1"]
    assert "birch" not in alone["text"] and "cedar" in alone["text"]


def test_switching_per_reader_on_marks_a_rebuild_that_drops_a_plain_first_line_title(agent, knowledge_folder):
    """A per-reader collection never takes a plain first line (a paragraph labels may hide) as its
    documents' title; switching per-reader on a built collection says to rebuild, and the rebuild
    re-reads every document to change the titles, and so the vectors."""
    from collections_app.services.readers.labels import PER_READER_SWITCHED, set_per_reader

    collection = create_collection(agent=agent, name="switch", method="structure", size=120, overlap=0)
    knowledge_folder("switch", {"doc.md": "\n\n".join(paragraph(i) for i in range(3)) + "\n"})
    build_collection(collection=collection)
    contexts = set(Paragraph.objects.filter(collection=collection).values_list("context", flat=True))
    assert contexts == {paragraph(0)}  # the plain first line is the title of a collection for everyone
    assert set_per_reader(collection=collection, per_reader=True)
    collection.refresh_from_db()
    assert collection.rebuild_needed == PER_READER_SWITCHED
    run = build_collection(collection=collection)
    assert (run.documents_read, run.documents_reused) == (1, 0)
    contexts = set(Paragraph.objects.filter(collection=collection).values_list("context", flat=True))
    assert contexts == {"doc"}
    collection.refresh_from_db()
    assert collection.rebuild_needed == ""


def test_switching_per_reader_in_the_admin_queues_the_rebuild_and_says_so(
    admin_client, agent, knowledge_folder, django_capture_on_commit_callbacks
):
    """The switch needs a rebuild; the admin queues it rather than leaving a red badge to the librarian."""
    from django.contrib.messages import get_messages
    from django.urls import reverse

    collection = create_collection(agent=agent, name="switch", method="structure", size=120, overlap=0)
    knowledge_folder("switch", {"doc.md": "\n\n".join(paragraph(i) for i in range(3)) + "\n"})
    build_collection(collection=collection)
    with django_capture_on_commit_callbacks(execute=True):
        answer = admin_client.post(
            reverse("admin:collections_app_collection_per_reader", args=[collection.pk])
        )
    said = " ".join(str(m) for m in get_messages(answer.wsgi_request))
    assert "Build 2 of switch queued" in said
    latest = collection.runs.first()
    assert latest.number == 2 and latest.status == "succeeded"  # tasks run synchronously in tests
    collection.refresh_from_db()
    assert collection.per_reader and collection.rebuild_needed == ""
    contexts = set(Paragraph.objects.filter(collection=collection).values_list("context", flat=True))
    assert contexts == {"doc"}
    page = admin_client.get(reverse("admin:collections_app_collection_change", args=[collection.pk]))
    assert 'data-role="not-searchable"' not in page.content.decode()


def test_a_switch_whose_rebuild_cannot_start_shows_answers_not_cannot_answer(
    admin_client, agent, knowledge_folder
):
    """While a switch waits for its rebuild the collection answers: the badge says so, never red."""
    from django.urls import reverse

    from collections_app.services.readers.labels import set_per_reader

    collection = create_collection(agent=agent, name="waits", method="structure", size=120, overlap=0)
    knowledge_folder("waits", {"doc.md": paragraph(0) + "\n"})
    build_collection(collection=collection)
    set_per_reader(collection=collection, per_reader=True)  # as the service alone does: no rebuild
    page = admin_client.get(reverse("admin:collections_app_collection_change", args=[collection.pk]))
    body = page.content.decode()
    assert 'data-role="rebuild-pending"' in body and "answers; needs a rebuild" in body
    assert 'data-role="not-searchable"' not in body
