"""Entries as units (issue 45, item 2; ENTRIES): a paragraph that is a list, a table or a run of Q/A items is
also indexed by its entries, scored by its best entry and itself, and shortened around that entry."""

import pytest

from collections_app.models import CollectionBuilt, Paragraph
from collections_app.services import indexes
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.search import approximate, collection_index, search_collection
from collections_app.text.entries import entry_spans

pytestmark = pytest.mark.django_db

OPTIONS = [
    ("-a, --all", "list every entry including the ones whose names start with a dot"),
    ("-b, --bytes", "count the size in bytes rather than in blocks of the device"),
    ("-c, --columns", "arrange the output in columns across the width of the terminal"),
    ("-d, --directory", "show directories themselves instead of what they contain"),
    ("-e, --escape", "print octal escapes for characters that cannot be shown"),
    ("-f, --force", "go on when a file cannot be opened and report it at the end"),
    ("-g, --group", "show the owning group beside each name in the long format"),
    ("-h, --human", "print sizes with a unit suffix such as K, M and G"),
    ("-i, --inode", "print the index number of each file before its name"),
    ("-j, --journal", "write a line to the journal for every file that is touched"),
    ("-k, --keep", "keep partial output when an error interrupts the work"),
    ("-q, --quarantine-purge", "erase the quarantined temporary copies older than a week"),
]
QUESTION = "erase quarantined temporary copies"
DISTRACTOR = (
    "# Temporary copies\n\nTemporary copies are made often. Copies of copies are temporary too; the "
    "temporary copies of temporary copies are copies like any copies, and a copy of temporary copies "
    "stays a temporary copy among copies.\n"
)


def manual() -> str:
    entries = "\n".join(f"       {term}\n              {text}\n" for term, text in OPTIONS)
    return f"# tool(1)\n\n## OPTIONS\n\n{entries}"


def build(agent, knowledge_folder, settings, entries: bool, name: str = "shelf"):
    settings.ENTRIES = entries
    collection = create_collection(agent=agent, name=name, method="structure", size=1800, overlap=0)
    knowledge_folder(name, {"tool.md": manual(), "copies.md": DISTRACTOR})
    assert build_collection(collection=collection).status == "succeeded"
    return collection


def ask(agent, collection, **kwargs):
    kwargs.setdefault("around", 0)
    return search_collection(agent=agent, collection=collection, question=QUESTION, **kwargs)


def test_a_list_table_and_qa_run_have_entries_and_prose_has_none():
    assert len(entry_spans(manual())) == len(OPTIONS)
    table = "| flag | effect |\n|---|---|\n" + "".join(f"| -{c} | {c} |\n" for c in "abcde")
    assert len(entry_spans(table)) == 5
    asked = [("Where do I park?", "A: Behind the office."), ("When does it open?", "At eight.")]
    asked += [(f"Question {i}?", f"A: Answer {i}.") for i in range(3)]
    qa = "\n\n".join(f"Q: {q}\n{a}" if a.startswith("A:") else f"Q: {q}\n\n{a}" for q, a in asked)
    assert [qa[a:b] for a, b in entry_spans(qa)][:2] == [
        "Q: Where do I park?\nA: Behind the office.",
        "Q: When does it open?\n\nAt eight.",
    ]
    assert len(entry_spans(qa)) == 5
    assert entry_spans(DISTRACTOR) == []


def test_prose_with_a_few_indented_blocks_is_not_a_list():
    # The dev set's two losses when four entries made a list: a paragraph of prose around code that reads
    # as term lines over indented descriptions, and a help text's "positional arguments:" over one line.
    code = (
        "A class in an except clause is compatible with an exception if it is the same class.\n\n"
        "class B(Exception):\n    pass\nclass C(B):\n    pass\nclass D(C):\n    pass\n\n"
        "for cls in [B, C, D]:\n    print(cls)\n\nNote that the order of the except clauses matters.\n"
    )
    assert entry_spans(code) == []
    usage = (
        "The command, if run with -h, will show the available options:\n\n"
        "usage: venv [-h] ENV_DIR\npositional arguments:\n"
        "  ENV_DIR               A directory to create the environment in.\n"
    )
    assert entry_spans(usage) == []
    # What the row shares with an earlier one (its carried opening) is never read as an entry.
    text = manual()
    carried = text.index("-c, --columns")
    assert all(a >= carried for a, _b in entry_spans(text, carried))


def test_an_entry_deep_in_a_long_option_list_beats_a_paragraph_that_repeats_the_words(
    agent, knowledge_folder, settings
):
    without = build(agent, knowledge_folder, settings, entries=False, name="plain")
    assert "Temporary copies are made" in ask(agent, without, most=1)["paragraphs"][0]["text"]
    assert not Paragraph.objects.filter(collection=without, entry_embedding__isnull=False).exists()

    with_entries = build(agent, knowledge_folder, settings, entries=True)
    top = ask(agent, with_entries, most=1)["paragraphs"][0]
    assert "--quarantine-purge" in top["text"]


def test_a_shortened_hit_is_centred_on_its_entry(agent, knowledge_folder, settings):
    collection = build(agent, knowledge_folder, settings, entries=True)
    answer = ask(agent, collection, most=1, max_chars=300)
    paragraph = answer["paragraphs"][0]
    assert answer["cut"] is True
    assert "-q, --quarantine-purge" in paragraph["text"] and "older than a week" in paragraph["text"]
    assert "--all" not in paragraph["text"]  # the list's opening, which the words would not choose either
    (excerpt,) = paragraph["excerpts"]
    stored = Paragraph.objects.get(collection=collection, text__contains="--quarantine-purge").text
    assert stored[excerpt["start"] : excerpt["end"]].strip() == paragraph["text"].strip()


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
@pytest.mark.parametrize("method, size", [("structure", 1800), ("fixed", 600)])
def test_the_ivf_path_gives_the_exact_paths_answer_with_entries(
    agent, knowledge_folder, settings, mode, method, size
):
    settings.ENTRIES = True
    collection = create_collection(agent=agent, name="many", method=method, size=size)
    notes = {f"note-{i:02d}.md": f"# Note {i}\n\nThe survey {i} of crate {i} was filed.\n" for i in range(30)}
    knowledge_folder("many", {"tool.md": manual(), "copies.md": DISTRACTOR, **notes})
    assert build_collection(collection=collection).status in ("succeeded", "succeeded_with_review")
    index = collection_index(collection, CollectionBuilt.objects.get(collection=collection))
    assert index.entries is not None and index.entries.size >= 5
    settings.IVF_MIN_PARAGRAPHS = 0
    exact = ask(agent, collection, mode=mode, most=20, min_score=0.0)
    settings.IVF_MIN_PARAGRAPHS, settings.IVF_NPROBE = 1, 10_000
    assert ask(agent, collection, mode=mode, most=20, min_score=0.0) == exact
    # With one list probed, the rows that entries lift are still candidates, at their exact scores and in
    # their exact order. A row without entries outside that list may be missed: the IVF's approximation,
    # the same without entries (with fixed 600-character pieces a note ranked third is, entries or not).
    approximate._ivf_cache.clear()
    settings.IVF_NPROBE = 1
    one = ask(agent, collection, mode=mode, most=3, min_score=0.0)["paragraphs"]
    lifted = [hit for hit in exact["paragraphs"][:3] if "--" in hit["text"] or "OPTIONS" in hit["text"]]
    assert lifted and [hit for hit in one if hit in lifted] == lifted
    if method == "structure":  # every row of the exact top 3 is in the probed list or lifted
        assert one == exact["paragraphs"][:3]


def test_a_build_with_entries_is_one_transaction(agent, knowledge_folder, settings, monkeypatch):
    collection = build(agent, knowledge_folder, settings, entries=False)
    before = list(Paragraph.objects.filter(collection=collection).values_list("pk", "entry_embedding"))
    built = CollectionBuilt.objects.get(collection=collection).built_at

    def broken(*_args):
        raise OSError("no space left on device")

    monkeypatch.setattr(indexes, "entry_writers", broken)
    settings.ENTRIES = True  # every document is read again, its entries embedded: then the index fails
    assert build_collection(collection=collection).status == "failed"
    # Nothing of the failed build is left: the same rows, none with entry vectors, the same build answering.
    after = Paragraph.objects.filter(collection=collection).values_list("pk", "entry_embedding")
    assert list(after) == before
    assert CollectionBuilt.objects.get(collection=collection).built_at == built
    assert "Temporary copies" in ask(agent, collection, most=1)["paragraphs"][0]["text"]


def rebuilt(agent, knowledge_folder, settings, entries: bool, name: str, tools: list[str]):
    """The queries of a rebuild of an unchanged folder of `tools` manuals, and the rows with entries."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.ENTRIES = entries
    collection = create_collection(agent=agent, name=name, method="structure", size=1800, overlap=0)
    knowledge_folder(name, {f"{tool}.md": manual().replace("tool(", f"{tool}(") for tool in tools})
    assert build_collection(collection=collection).status == "succeeded"
    with CaptureQueriesContext(connection) as queries:
        assert build_collection(collection=collection).documents_reused == len(tools)
    return len(queries), Paragraph.objects.filter(
        collection=collection, entry_embedding__isnull=False
    ).count()


def test_entries_cost_a_rebuild_no_query_of_their_own(agent, knowledge_folder, settings):
    """The index's entries are gathered from the one read of the rows its paragraphs are written from: a
    rebuild with entries asks the database what one without them asks, however many rows hold entries."""
    tools = ["awk", "bash", "cat", "dd", "env", "find", "grep", "head", "ls", "sed", "tar", "zip"]
    plain, none = rebuilt(agent, knowledge_folder, settings, False, "plain", tools[:3])
    few, some = rebuilt(agent, knowledge_folder, settings, True, "few", tools[:3])
    many, more = rebuilt(agent, knowledge_folder, settings, True, "many", tools)
    assert none == 0 and 0 < some < more
    assert plain == few == many


# --- Known answers and measure rank with entries as a search does (issue 45, item 1) -----------------

MARKER = "older than a week"  # only in the option the question asks for


def search_rank(agent, collection) -> int | None:
    """The rank a search at the defaults an agent meets gives the paragraph holding the marker."""
    answer = search_collection(agent=agent, collection=collection, question=QUESTION)
    texts = [" ".join(p["text"].split()).casefold() for p in answer["paragraphs"]]
    return next((rank for rank, text in enumerate(texts, start=1) if MARKER in text), None)


@pytest.mark.parametrize("entries", [True, False])
def test_known_answers_and_measure_rank_an_entry_where_a_search_ranks_it(
    agent, knowledge_folder, settings, entries
):
    from collections_app.models import KnownAnswersReport
    from collections_app.services import known_answers
    from collections_app.services.measure import measure_collection

    settings.KNOWN_ANSWERS_GATE = 1  # the build is measured before its swap (the candidate's rows)
    settings.ENTRIES = entries
    collection = create_collection(agent=agent, name="shelf", method="structure", size=1800, overlap=0)
    knowledge_folder("shelf", {"tool.md": manual(), "copies.md": DISTRACTOR})
    known_answers.set_known_answers(collection=collection, items=[{"question": QUESTION, "answer": MARKER}])
    run = build_collection(collection=collection)
    assert run.status == "succeeded"
    searched = search_rank(agent, collection)
    # With entries the option deep in the list is the first answer; without, the paragraph repeating the
    # question's words is, and every measurement must say so too.
    assert searched == (1 if entries else 2)

    gated = KnownAnswersReport.objects.get(build=run)
    live = known_answers.measure_build(build_id=run.pk)  # the live build's rows, after the swap
    for report in (gated, live):
        (result,) = report.results
        assert (result["rank"], result["found_at_1"]) == (searched, entries)
        assert report.found_at_1 == int(entries)

    measured = measure_collection(
        collection=collection,
        questions=[{"question": QUESTION, "answer": MARKER}],
        variants=[{"method": "structure", "size": 1800, "around": 1}],
    )
    (outcome,) = measured["variants"][0]["questions"]
    assert (outcome["rank"], outcome["found_at_1"]) == (searched, entries)


def test_the_playgrounds_explanation_adds_up_to_the_score_an_entry_gave(agent, knowledge_folder, settings):
    from ragsite.fusion import FUSION_WEIGHT

    collection = build(agent, knowledge_folder, settings, entries=True)
    answer = ask(agent, collection, most=1, explain=True)  # what the admin's playground asks
    [run] = answer["paragraphs"]
    [hit] = [piece for pieces in answer["explain"]["pieces"] for piece in pieces if piece["hit"]]
    assert "--quarantine-purge" in hit["text"] and hit["score"] == run["score"]
    assert hit["score"] == pytest.approx(
        FUSION_WEIGHT * hit["semantic"] + (1 - FUSION_WEIGHT) * hit["lexical"], abs=1e-5
    )
