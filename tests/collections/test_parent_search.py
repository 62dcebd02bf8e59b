"""A parent collection searched (issue 28): a hit comes back with its section, what a reader may not read
is never part of it (the twin test of tests/collections/test_reader_view.py), and export/import keep it."""

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collections_app.models import Label, Paragraph
from collections_app.services.agents import create_collection, create_reader
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from tests.collections.test_parent import MAN
from tests.collections.test_reader_view import ask_both, delete_rows, paragraph, shown

pytestmark = pytest.mark.django_db

SECTIONS, PER_SECTION = 3, 3  # paragraph n of section s is paragraph(s * PER_SECTION + n)


def sectioned(kept) -> str:
    """Sections "# Part s" of PER_SECTION paragraphs, only the paragraphs in ``kept``."""
    parts = []
    for s in range(SECTIONS):
        body = [paragraph(s * PER_SECTION + n) for n in range(PER_SECTION) if s * PER_SECTION + n in kept]
        parts.append(f"# Part {s}\n\n" + "\n\n".join(body))
    return "\n\n".join(parts) + "\n"


@pytest.fixture
def parent_twins(agent, knowledge_folder):
    """A per-reader parent collection with some paragraphs hidden from alice, and its twin: the same
    collection with them deleted (so the gaps they leave are its gaps too).

    Each paragraph is one piece (size 100). A section's opening paragraph carries its heading and is
    never hidden, so the twin's sections are the same sections."""
    made = iter(range(1000))
    create_reader(external_id="alice", labels=["pub"])
    public, secret = Label.objects.get_or_create(name="pub")[0], Label.objects.get_or_create(name="secret")[0]
    every = range(SECTIONS * PER_SECTION)

    def make(hidden: set[int]):
        n = next(made)
        pair = []
        for name in (f"x{n}", f"y{n}"):
            collection = create_collection(agent=agent, name=name, method="parent", size=100, per_reader=True)
            knowledge_folder(name, {"doc.md": sectioned(set(every))})
            build_collection(collection=collection)
            rows = list(Paragraph.objects.filter(collection=collection))
            hides = [row for row in rows if any(row.text == paragraph(i) for i in hidden)]
            for row in rows:
                row.labels.add(secret if row in hides else public)
            if name.startswith("y") and hides:
                delete_rows(collection, hides)
            pair.append(collection)
        return pair

    return make


HIDDEN = st.sets(st.sampled_from([i for i in range(SECTIONS * PER_SECTION) if i % PER_SECTION]), max_size=4)
QUESTION = st.sampled_from(["birch policy", "ember fjord grove", "heron inlet", "apple cedar"])


@given(hidden=HIDDEN, around=st.integers(0, 2), question=QUESTION)
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_readers_sections_are_those_of_the_collection_without_its_hidden_pieces(
    agent, parent_twins, hidden, around, question
):
    """Texts, passages, ids, positions, scores and order equal the twin's: a returned section never
    holds a piece the reader may not read, nor stops where one sits."""
    hidden_one, twin = parent_twins(hidden)
    mine, theirs = ask_both(agent, hidden_one, twin, question, around)
    assert shown(mine["paragraphs"]) == shown(theirs["paragraphs"])
    assert mine == theirs  # the whole answer: scores, order, counts
    secrets = {paragraph(i) for i in hidden}
    assert not any(secret in p["text"] for p in mine["paragraphs"] for secret in secrets)


def test_a_hit_comes_back_with_its_whole_section_and_hits_in_one_section_merge(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="parts", method="parent", size=100)
    knowledge_folder("parts", {"doc.md": sectioned(set(range(SECTIONS * PER_SECTION)))})
    build_collection(collection=collection)
    answer = search_collection(
        agent=agent, collection=collection, question="birch cedar", min_score=0, most=5
    )
    first = answer["paragraphs"][0]
    assert first["section"] == "Part 0" and first["passages"] == PER_SECTION
    # The paragraphs as the document lays them out, each on its own lines.
    assert first["text"] == "# Part 0\n\n" + "\n\n".join(paragraph(i) for i in range(PER_SECTION))
    sections = [p["section"] for p in answer["paragraphs"]]
    assert len(sections) == len(set(sections)) > 1  # five hits, one paragraph a section
    assert all(p["passages"] == PER_SECTION for p in answer["paragraphs"])
    alone = search_collection(
        agent=agent, collection=collection, question="birch", min_score=0, most=1, around=0
    )
    assert alone["paragraphs"][0]["text"] == paragraph(1)  # around 0: the piece alone


def test_which_flag_does_x_finds_the_options_entry(agent, knowledge_folder, settings):
    settings.EMBED_BACKEND = "none"
    collection = create_collection(agent=agent, name="man", method="parent")
    knowledge_folder("man", {"ls.md": MAN})
    build_collection(collection=collection)
    answer = search_collection(
        agent=agent,
        collection=collection,
        question="which flag does not list the implied directories",
        min_score=0,
        most=1,
        around=0,
    )
    assert answer["paragraphs"][0]["text"].startswith("-A, --almost-all")


def test_a_parent_collection_exported_and_imported_answers_with_its_sections(
    agent, knowledge_folder, tmp_path
):
    from collections_app.services.interchange import export_index, import_index

    collection = create_collection(agent=agent, name="parts", method="parent", size=100)
    knowledge_folder("parts", {"doc.md": sectioned(set(range(SECTIONS * PER_SECTION)))})
    build_collection(collection=collection)
    asked = {"question": "birch cedar", "min_score": 0, "most": 5}
    before = search_collection(agent=agent, collection=collection, **asked)["paragraphs"]
    export_index(collection=collection, directory=tmp_path)
    imported = import_index(agent=agent, directory=tmp_path, index_id="parts", name="again")
    assert imported.method == "parent"
    after = search_collection(agent=agent, collection=imported, **asked)["paragraphs"]
    # The format carries no whitespace between chunks: an imported collection joins them with a space.
    assert [(p["text"].split(), p["passages"], p["section"]) for p in after] == [
        (p["text"].split(), p["passages"], p["section"]) for p in before
    ]
