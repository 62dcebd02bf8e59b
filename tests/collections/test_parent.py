"""The parent strategy (issue 28): small pieces of sections, list entries and table rows as their own
pieces with their term or header as context, and a hit answered with its section (pure parts)."""

from hypothesis import given
from hypothesis import strategies as st

from collections_app.text.chunking import chunk, returns_sections
from collections_app.text.context import contexts_for
from collections_app.text.stitch import Row, stitch_sections
from tests.collections.test_chunking import FAST, assert_well_formed, texts

LIST_FRAGMENTS = [
    "\n       -a, --all\n              do not ignore entries starting with .\n",
    "\n  --block-size=SIZE  scale sizes by SIZE\n",
    "\n| Code | Meaning |\n|---|---|\n| 0 | ok |\n| 2 | bad |\n",
    "\nterm\n    its definition. Another sentence here.\n",
    "\n- item\n- item two\n", "\n1. first\n2. second\n",
]  # fmt: skip
listy = st.lists(st.sampled_from(LIST_FRAGMENTS) | texts, max_size=12).map("".join)

MAN = """# ls(1)

## Options

Mandatory arguments to long options are mandatory for short options too.

       -a, --all
              do not ignore entries starting with .

       -A, --almost-all
              do not list implied . and ..

       --block-size=SIZE
              with -l, scale sizes by SIZE when printing them. This long description runs on and on,
              past the size of one piece, so it is cut into windows that each carry the option's name.

## Exit status

| Code | Meaning |
|---|---|
| 0 | if OK |
| 1 | if minor problems (e.g., cannot access subdirectory) |
| 2 | if serious trouble (e.g., cannot access command-line argument) |
"""


@FAST
@given(listy, st.integers(1, 600))
def test_parent_pieces_are_exact_slices_within_the_size_and_cover_the_text(text, size):
    pieces = chunk(text, "parent", size=size)
    assert_well_formed(text, pieces, ordered_without_overlap=True)
    assert all(len(piece.text) <= size for piece in pieces)


@FAST
@given(listy, st.integers(20, 600))
def test_parent_pieces_never_cross_a_section(text, size):
    by_structure = chunk(text, "structure", size=10**6, overlap=0)  # one piece a section
    bounds = [(p.start, p.end) for p in by_structure]
    for piece in chunk(text, "parent", size=size):
        assert any(start <= piece.start and piece.end <= end for start, end in bounds), piece


def test_each_option_and_table_row_is_its_own_piece_with_its_term_or_header_as_entry():
    pieces = chunk(MAN, "parent", size=200)
    texts_ = [p.text for p in pieces]
    assert "-a, --all\n              do not ignore entries starting with ." in texts_
    assert "-A, --almost-all\n              do not list implied . and .." in texts_
    assert "| 1 | if minor problems (e.g., cannot access subdirectory) |" in texts_
    rows = [p for p in pieces if p.text.startswith("| 2 ")]
    assert rows and rows[0].entry == "Code Meaning" and rows[0].section == "Exit status"
    block = [p for p in pieces if "past the size" in p.text or "--block-size" in p.text]
    assert len(block) >= 2 and block[0].entry == ""  # the entry's first piece names the option itself
    assert all(p.entry == "--block-size=SIZE" for p in block[1:])
    assert not any("-a, --all" in p.text and "-A" in p.text for p in pieces)  # entries never packed


def test_an_entry_is_indexed_with_its_term_beside_the_sections():
    pieces = chunk(MAN, "parent", size=200)
    contexts = contexts_for("ls.md", MAN, [p.start for p in pieces], [p.entry for p in pieces])
    window = next(i for i, p in enumerate(pieces) if p.entry == "--block-size=SIZE")
    assert contexts[window] == "ls(1) › Options › --block-size=SIZE"
    row = next(i for i, p in enumerate(pieces) if p.text.startswith("| 2 "))
    assert contexts[row] == "ls(1) › Exit status › Code Meaning"


def test_prose_paragraphs_are_packed_whole_while_they_fit():
    text = "# A\n\nOne short line.\n\nTwo short line.\n\nThree is a longer paragraph of words."
    assert [p.text for p in chunk(text, "parent", size=40)] == [
        "# A\n\nOne short line.\n\nTwo short line.",
        "Three is a longer paragraph of words.",
    ]


def test_only_the_parent_strategy_returns_sections():
    assert returns_sections("parent") and not returns_sections("structure") and not returns_sections("nope")


# --- A hit answered with its section ------------------------------------------------------------


def rows_of(sections: list[tuple[str, list[str]]], document: int = 0) -> dict[int, Row]:
    rows, at = {}, 0
    for name, pieces in sections:
        for text in pieces:
            n = len(rows)
            rows[n] = Row(
                ordinal=n, document=document, start=at, end=at + len(text), text=text, section=name, index=n
            )
            at += len(text) + 1
    return rows


def test_a_hit_comes_back_with_its_section_and_hits_of_one_section_merge_at_the_best_score():
    rows = rows_of([("A", ["a0", "a1", "a2"]), ("B", ["b0", "b1"]), ("C", ["c0"])])
    runs = stitch_sections([(1, 0.4), (3, 0.9), (4, 0.5)], rows, bound=1000)
    assert [(r.text, r.score, r.section, r.passages) for r in runs] == [
        ("b0 b1", 0.9, "B", 2),
        ("a0 a1 a2", 0.4, "A", 3),
    ]


def test_a_section_longer_than_the_bound_comes_back_as_its_window_around_the_hit():
    rows = rows_of([("A", [f"piece{n}" for n in range(10)])])  # 6 characters each
    [run] = stitch_sections([(5, 1.0)], rows, bound=6 * 3 + 2)
    assert run.text == "piece4 piece5 piece6" and (run.first, run.last, run.hit) == (4, 6, 5)


def test_a_gap_stops_a_section_and_touching_runs_of_two_sections_stay_apart():
    rows = rows_of([("A", ["a0", "a1", "a2"]), ("B", ["b0"])])
    del rows[1]
    runs = stitch_sections([(0, 0.5), (2, 0.6), (3, 0.7)], rows, bound=1000)
    assert [r.text for r in runs] == ["b0", "a2", "a0"]
