"""A paragraph's title and section: indexed beside its text on both arms, never returned as its text."""

import numpy as np
import pytest

from collections_app.index.vector_codec import decode
from collections_app.models import Paragraph
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from collections_app.text.context import (
    contexts_for,
    document_title,
    embedding_text,
    lexical_with_context,
    paragraph_context,
    section_paths,
)
from ragsite import embedding

CHAPTER = (
    "# Routine Vacuuming\n\nIntro text.\n\n## The Autovacuum Daemon\n\nIt runs by itself.\n\n"
    "### Temporary tables\n\nTemporary tables cannot be accessed by autovacuum.\n\n"
    "```\n# not a heading\n```\n\n## Wraparound\n\nFreeze old rows.\n"
)


def test_the_title_is_the_opening_heading_a_first_level_heading_a_title_line_or_the_name():
    assert document_title("x.md", "\n# Routine Vacuuming\n\ntext") == "Routine Vacuuming"
    assert (
        document_title("travel.html", "Intranet home\n\n# Travel policy\n\n## Booking\n\nx")
        == "Travel policy"
    )
    assert document_title("4983.txt", "Vitamin D and falls\n\nAn abstract.") == "Vitamin D and falls"
    assert document_title("policies/travel-policy_2024.txt", "Trips are booked early.\nBy the desk.") == (
        "travel policy 2024"
    )
    assert (
        document_title("4983.txt", "An abstract with no title.\nIt goes on.") == ""
    )  # a number names nothing
    assert document_title("long.txt", "x" * 300 + "\n\nbody") == "long"


def test_the_section_path_follows_heading_levels_and_ignores_code_fences():
    starts = [CHAPTER.index(t) for t in ("Intro", "It runs", "Temporary tables cannot", "Freeze")]
    assert section_paths(CHAPTER, starts) == [
        ["Routine Vacuuming"],
        ["Routine Vacuuming", "The Autovacuum Daemon"],
        ["Routine Vacuuming", "The Autovacuum Daemon", "Temporary tables"],
        ["Routine Vacuuming", "Wraparound"],  # the fenced "# not a heading" closed nothing
    ]
    # A piece that opens with its headings sits under them.
    assert section_paths(CHAPTER, [CHAPTER.index("### Temporary")])[0][-1] == "Temporary tables"


def test_the_context_joins_title_and_path_without_repeating_the_title():
    assert (
        paragraph_context("Routine Vacuuming", ["Routine Vacuuming", "Wraparound"])
        == "Routine Vacuuming › Wraparound"
    )
    assert paragraph_context("", []) == ""
    assert contexts_for("c.md", CHAPTER, [CHAPTER.index("Freeze")]) == ["Routine Vacuuming › Wraparound"]
    assert embedding_text("Freeze old rows.", "Routine Vacuuming › Wraparound") == (
        "Routine Vacuuming › Wraparound\n\nFreeze old rows."
    )
    assert embedding_text("Freeze old rows.", "") == "Freeze old rows."
    # A paragraph opening with its whole context (a plain-text title over the body) is embedded as it is.
    assert embedding_text("Vitamin D and falls\n\nAn abstract.", "Vitamin D and falls") == (
        "Vitamin D and falls\n\nAn abstract."
    )


def test_a_context_match_adds_its_weight_and_no_match_changes_nothing():
    text, bound = np.array([2.0, 0.0, 1.0]), 4.0
    context, context_bound = np.array([0.0, 3.0, 3.0]), 3.0
    combined, same_bound = lexical_with_context(text, bound, context, context_bound, weight=0.3)
    assert same_bound == bound
    assert np.allclose(combined / bound, text / bound + 0.3 * context / context_bound)
    assert combined[0] == text[0]  # no context match: the text's own score
    unchanged, _ = lexical_with_context(text, bound, None, 0.0, weight=0.3)
    assert unchanged is text


@pytest.mark.django_db
def test_a_build_stores_the_context_embeds_it_and_search_returns_the_paragraph_alone(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="manual", method="structure")
    knowledge_folder("manual", {"vacuum.md": CHAPTER})
    assert build_collection(collection=collection).status == "succeeded"
    row = Paragraph.objects.get(collection=collection, text__contains="cannot be accessed")
    assert row.context == "Routine Vacuuming › The Autovacuum Daemon › Temporary tables"
    assert "Routine Vacuuming" not in row.text
    expected = embedding.get_embedder().embed([embedding_text(row.text, row.context)])[0]
    assert np.allclose(decode(row.embedding, 64)[0], expected, atol=1e-3)  # stored as float16

    # Only the title and section say "routine vacuuming": the context makes the paragraph findable,
    # and the answer carries the paragraph's own text.
    answer = search_collection(
        agent=agent,
        collection="manual",
        question="routine vacuuming temporary tables",
        mode="lexical",
        around=0,
        min_score=0,
    )
    assert "cannot be accessed" in answer["paragraphs"][0]["text"]
    assert all("›" not in p["text"] for p in answer["paragraphs"])


@pytest.mark.django_db
def test_renaming_a_section_re_embeds_its_paragraphs_but_not_the_others(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="manual", method="structure")
    folder = knowledge_folder("manual", {"vacuum.md": CHAPTER})
    build_collection(collection=collection)
    (folder / "vacuum.md").write_text(CHAPTER.replace("## Wraparound", "## Transaction ID wraparound"))
    run = build_collection(collection=collection)
    # The heading line is text too: the paragraph under it changed, and so did its context.
    assert run.paragraphs_embedded == 1
    renamed = Paragraph.objects.get(collection=collection, text__contains="Freeze")
    assert renamed.context == "Routine Vacuuming › Transaction ID wraparound"
