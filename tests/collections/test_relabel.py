"""Labels survive an edit next to them (issue 24, item 5): a rebuilt piece carries labels by its own
text, not by the opening it copies from its neighbour; a piece that matches nothing takes what the
pieces it overlaps all demand, and the build says so."""

import pytest

from collections_app.models import BuildRun, Label, Paragraph
from collections_app.services.agents import create_collection, create_reader
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from collections_app.text.relabel import Carried, carry_labels, own_fingerprint

PUB, SECRET, HR = 1, 2, 3


def fp(text: str) -> str:
    return own_fingerprint(text, 0)


def test_a_piece_whose_own_text_is_unchanged_keeps_its_labels_whatever_it_carries():
    old = [(fp("public"), frozenset({PUB})), (fp("secret"), frozenset({SECRET}))]
    assert carry_labels(old, [fp("public, edited"), fp("secret")]) == [
        Carried(labels=frozenset({PUB}), matched=False, overlapped=(0,)),
        Carried(labels=frozenset({SECRET})),
    ]


def test_an_unmatched_piece_keeps_only_what_every_labelled_piece_it_overlaps_demands():
    old = [
        (fp("a"), frozenset({PUB})),
        (fp("b"), frozenset({SECRET, HR})),
        (fp("c"), frozenset({HR})),
        (fp("d"), frozenset()),
    ]
    # "b" and "c" rewritten as one piece between the anchors "a" and "d": both demand HR.
    [_a, merged, _d] = carry_labels(old, [fp("a"), fp("b and c"), fp("d")])
    assert merged == Carried(labels=frozenset({HR}), matched=False, overlapped=(1, 2))
    # Pieces with no label in common: no label can say "both", so it is held back.
    [held, _c] = carry_labels(old, [fp("a and b"), fp("c")])
    assert held.held_back and held.overlapped == (0, 1)
    # Inserted where nothing stood: it overlaps its two neighbours.
    [_a, inserted, _b] = carry_labels(old[:2], [fp("a"), fp("new"), fp("b")])
    assert inserted.overlapped == (0, 1) and inserted.held_back
    # Nothing labelled around it: nothing to keep.
    assert carry_labels([(fp("x"), frozenset())], [fp("y")])[0] == Carried(matched=False, overlapped=(0,))


MEMO = (
    "# Memo\n\n"
    + "Our public leave policy is generous and clear to everyone. " * 4
    + "\n\n"
    + "The zanzibarquux codename covers SECRETSALARY bands of ninety million. " * 4
    + "\n"
)


@pytest.mark.django_db
def test_an_edit_to_a_public_paragraph_never_makes_the_restricted_one_after_it_public(
    agent, knowledge_folder
):
    """The review's F4: structure 400/150, a public paragraph then a secret one in one section."""
    collection = create_collection(
        agent=agent, name="edit", method="structure", size=400, overlap=150, per_reader=True
    )
    folder = knowledge_folder("edit", {"memo.md": MEMO})
    assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
    pub, secret = Label.objects.create(name="pub"), Label.objects.create(name="secret")
    for paragraph in Paragraph.objects.filter(collection=collection):
        paragraph.labels.add(secret if "zanzibarquux" in paragraph.text else pub)
    create_reader(external_id="alice", labels=["pub"])

    def alice_reads() -> str:
        answer = search_collection(
            agent=agent,
            collection=collection,
            question="zanzibarquux SECRETSALARY",
            reader="alice",
            min_score=0,
            most=50,
            around=0,
        )
        return " ".join(p["text"] for p in answer["paragraphs"])

    assert "SECRETSALARY" not in alice_reads()
    reviewed = MEMO.replace("to everyone. \n", "to everyone. Reviewed in 2026.\n")
    (folder / "memo.md").write_text(reviewed)
    run = build_collection(collection=collection)
    assert run.status == BuildRun.SUCCEEDED
    assert "SECRETSALARY" not in alice_reads()
    assert not any("have no label" in w for w in run.warnings)
    # Editing the secret paragraph itself: its pieces match nothing, take the secret label, and the
    # run says so.
    (folder / "memo.md").write_text(reviewed.replace("ninety million", "ninety-one million"))
    run = build_collection(collection=collection)
    assert "SECRETSALARY" not in alice_reads()
    assert any("memo.md: 1 changed paragraphs (#1) took the labels" in w for w in run.warnings), run.warnings
    # Two paragraphs with no label in common, rewritten as one: held back until a person labels it.
    (folder / "memo.md").write_text("# Memo\n\nOne short line now replaces both paragraphs.\n")
    run = build_collection(collection=collection)
    [held] = Paragraph.objects.filter(collection=collection)
    assert not held.enabled and not held.labels.exists()
    assert any("disabled until a person labels them" in w for w in run.warnings)
