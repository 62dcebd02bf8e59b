"""Chunking strategies: invariants with hypothesis, behaviours with worked examples."""

import re
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collections_app.text.chunking import (
    AVAILABLE,
    DEFAULT_SIZES,
    MAX_PARAGRAPHS_PER_DOCUMENT,
    STRATEGIES,
    ChunkingError,
    Chunks,
    Piece,
    chunk,
    resolve_sizes,
    validate_method,
)

FAST = settings(max_examples=60, deadline=None)

# --- text generators -----------------------------------------------------------------------------

FRAGMENTS = [
    "word", "policy", "a", "Carry-over", "days.", "3.14", "file.txt", "e.g.", "(five)", "“quoted”",
    "漢字かな交じり文", "これは文です。", "次の文！", "x" * 40, "y" * 130, "z" * 400,
    " ", " ", " ", "  ", "\t", "\n", "\n", "\n\n", "\n\n\n", " \n \n", "\u3000", "\r\n",
    "\n# Leave policy\n", "\n## Expenses\n\n", "\n### " + "h" * 350 + "\n", "\n#\n", "\n#notaheading\n",
    "\n```\n# inside code\n```\n", "\n\n- item one\n- item two\n\n",
]  # fmt: skip
texts = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=12), max_size=80).map("".join)
sizes = st.integers(min_value=1, max_value=600)


def assert_well_formed(text: str, pieces: list[Piece], *, ordered_without_overlap: bool) -> None:
    """The contract every strategy keeps: exact slices, trimmed, in order, nothing lost but whitespace."""
    covered = [False] * len(text)
    previous: Piece | None = None
    for piece in pieces:
        assert piece.text == text[piece.start : piece.end]
        assert piece.text and piece.text == piece.text.strip()
        assert 0 < len(piece.section) <= 300
        if previous is not None:
            assert piece.start > previous.start and piece.end > previous.end
            if ordered_without_overlap:
                assert piece.start >= previous.end
        for index in range(piece.start, piece.end):
            covered[index] = True
        previous = piece
    # A capped document loses its tail by design (and says so); nothing before the cut may be lost.
    until = pieces[-1].end if getattr(pieces, "truncated", False) else len(text)
    lost = [index for index, char in enumerate(text[:until]) if not covered[index] and not char.isspace()]
    assert lost == []


# --- the vocabulary ------------------------------------------------------------------------------


def test_available_is_the_built_names_in_vocabulary_order():
    assert AVAILABLE == ("fixed", "structure", "tokens", "window", "parent")
    assert AVAILABLE == tuple(name for name, version in STRATEGIES.items() if version)


def test_every_available_method_has_default_sizes_and_no_planned_one_does():
    assert set(DEFAULT_SIZES) == set(AVAILABLE)
    assert DEFAULT_SIZES["fixed"] == (350, 0)
    assert DEFAULT_SIZES["structure"] == (1800, 180)
    assert DEFAULT_SIZES["tokens"] == (200, 32)
    assert DEFAULT_SIZES["window"] == (None, 0)


def test_validate_method_returns_an_available_name():
    for name in AVAILABLE:
        assert validate_method(name) == name


def test_unknown_method_is_refused_listing_the_available_ones():
    with pytest.raises(ChunkingError) as caught:
        validate_method("x")
    available = "fixed, structure, tokens, window, parent"
    assert str(caught.value) == f'unknown chunking method "x"; available: {available}'


@pytest.mark.parametrize("name", ["semantic", "page", "proposition"])
def test_planned_method_is_refused_as_not_built_yet(name):
    with pytest.raises(ChunkingError) as caught:
        chunk("some text", name)
    assert (
        str(caught.value)
        == f'"{name}" is planned but not built yet; available: fixed, structure, tokens, window, parent'
    )


def test_chunking_error_is_a_value_error():
    assert issubclass(ChunkingError, ValueError)


@pytest.mark.parametrize(
    ("method", "size", "overlap"),
    [("fixed", 0, None), ("fixed", 100, 10), ("structure", 100, 100), ("structure", -5, None),
     ("tokens", 10, 10), ("window", 512, 5), ("structure", 100, -1)],
)  # fmt: skip
def test_impossible_sizes_are_refused(method, size, overlap):
    with pytest.raises(ChunkingError):
        resolve_sizes(method, size, overlap)


def test_sizes_left_empty_take_the_methods_defaults():
    assert resolve_sizes("structure") == (1800, 180)
    assert resolve_sizes("structure", 500) == (500, 180)
    assert resolve_sizes("window") == (None, 0)


# --- sections ------------------------------------------------------------------------------------


def test_text_before_any_heading_is_filed_under_document():
    pieces = chunk("Preface.\n\n# Leave\n\nFive days.", "structure")
    assert [(piece.text, piece.section) for piece in pieces] == [
        ("Preface.", "Document"),
        ("# Leave\n\nFive days.", "Leave"),
    ]


def test_a_hash_line_inside_a_code_fence_is_not_a_heading():
    pieces = chunk("# Real\n\n```\n# comment\n```\n\ntext", "fixed", size=1000)
    assert pieces[0].section == "Real"
    pieces = chunk("# Real\n\n```\n# comment\n```\n\ntext", "structure", size=12)
    assert {piece.section for piece in pieces} == {"Real"}


def test_section_names_are_cut_to_300_characters_and_closing_hashes_dropped():
    pieces = chunk(
        "# " + "n" * 400 + "\n\nbody\n\n## Costs ##\n\nmore\n\n# C#\n\nsharp", "structure", size=500
    )
    assert [piece.section for piece in pieces] == ["n" * 300, "Costs", "C#"]


def test_a_title_heading_with_nothing_under_it_joins_the_text_below_and_takes_its_heading():
    pieces = chunk("# Handbook\n\n## Leave\n\nCarry-over is capped at five days.", "structure")
    assert [(piece.text, piece.section) for piece in pieces] == [
        ("# Handbook\n\n## Leave\n\nCarry-over is capped at five days.", "Leave")
    ]


def test_a_heading_at_the_very_end_is_kept_as_a_piece():
    pieces = chunk("Body.\n\n# Appendix", "structure")
    assert [(piece.text, piece.section) for piece in pieces] == [
        ("Body.", "Document"),
        ("# Appendix", "Appendix"),
    ]


# --- fixed ---------------------------------------------------------------------------------------


@FAST
@given(texts, sizes)
def test_fixed_pieces_fit_and_cover_the_text_in_order(text, size):
    pieces = chunk(text, "fixed", size=size)
    assert_well_formed(text, pieces, ordered_without_overlap=True)
    assert all(len(piece.text) <= size for piece in pieces)
    assert isinstance(pieces, Chunks) and not pieces.truncated


@FAST
@given(texts, sizes)
def test_fixed_never_splits_a_word_no_longer_than_the_size(text, size):
    # The guarantee: a word (a run of non-whitespace) of at most `size` characters lies wholly in
    # one piece. Only a longer word is cut, and then into pieces of exactly `size` characters.
    pieces = chunk(text, "fixed", size=size)
    for word in re.finditer(r"\S+", text):
        holders = [piece for piece in pieces if piece.start < word.end() and word.start() < piece.end]
        if len(word.group()) <= size:
            assert len(holders) == 1 and holders[0].start <= word.start() and word.end() <= holders[0].end
    for piece in pieces:
        if piece.end < len(text) and not text[piece.end].isspace():
            assert len(piece.text) == size


@FAST
@given(texts, sizes)
def test_fixed_breaks_at_the_last_whitespace_of_its_window(text, size):
    # No further whole word would have fitted: past the break there is at most the start of one word.
    pieces = chunk(text, "fixed", size=size)
    for piece in pieces[:-1]:
        rest = text[piece.end : piece.start + size + 1]
        assert re.fullmatch(r"\s*\S*", rest)


def test_fixed_breaks_in_the_last_tenth_when_there_is_whitespace_there():
    text = " ".join(["abcdefghi"] * 30)  # 10-character steps
    pieces = chunk(text, "fixed", size=100)
    assert [len(piece.text) for piece in pieces] == [99] * 3
    assert all(piece.section == "Document" for piece in pieces)


def test_fixed_cuts_text_without_spaces_every_size_characters():
    text = "漢" * 25
    assert [piece.text for piece in chunk(text, "fixed", size=10)] == ["漢" * 10, "漢" * 10, "漢" * 5]


def test_fixed_takes_earlier_whitespace_when_the_last_tenth_has_none():
    text = "short " + "w" * 50 + " tail"
    assert [piece.text for piece in chunk(text, "fixed", size=40)] == ["short", "w" * 40, "w" * 10 + " tail"]


def test_fixed_section_is_the_heading_in_force_where_the_piece_starts():
    text = "# Leave\n\none two three four\n\n# Expenses\n\nfive six"
    pieces = chunk(text, "fixed", size=20)
    assert [(piece.text, piece.section) for piece in pieces] == [
        ("# Leave\n\none two", "Leave"),
        ("three four\n\n#", "Leave"),
        ("Expenses\n\nfive six", "Expenses"),
    ]


# --- structure -----------------------------------------------------------------------------------

structure_sizes = st.tuples(st.integers(20, 700), st.integers(0, 200)).filter(lambda pair: pair[1] < pair[0])


@FAST
@given(texts, structure_sizes)
def test_structure_pieces_fit_cover_the_text_and_overlap_at_most_the_configured_amount(text, size_overlap):
    size, overlap = size_overlap
    pieces = chunk(text, "structure", size=size, overlap=overlap)
    assert_well_formed(text, pieces, ordered_without_overlap=False)
    assert all(len(piece.text) <= size for piece in pieces)
    for previous, piece in pairwise(pieces):
        assert previous.end - piece.start <= overlap


words = st.text(alphabet="abcdefgh", min_size=1, max_size=8)


@st.composite
def paragraphs_of_short_words(draw):
    size = draw(st.integers(150, 500))
    overlap = draw(st.integers(20, size // 3))
    paragraphs = []
    for _ in range(draw(st.integers(1, 25))):
        paragraph = ""
        for word in draw(st.lists(words, min_size=1, max_size=60)):
            if len(paragraph) + 1 + len(word) > size - overlap:
                break
            paragraph = f"{paragraph} {word}" if paragraph else word
        paragraphs.append(paragraph)
    heading = draw(st.sampled_from(["", "# Section\n\n"]))
    return heading + "\n\n".join(paragraphs), size, overlap


@FAST
@given(paragraphs_of_short_words())
def test_structure_consecutive_pieces_of_a_section_overlap_by_about_the_configured_amount(case):
    # With single spaces and words of at most 8 letters, aligning the carried text forward to a
    # word start costs at most a word and its separator. Less is carried only where carrying that
    # much would push the next piece past its size (the paragraph after it is kept whole).
    text, size, overlap = case
    pieces = chunk(text, "structure", size=size, overlap=overlap)
    for previous, piece in pairwise(pieces):
        carried = previous.end - piece.start
        assert carried <= overlap
        if carried < overlap - 10:
            assert (piece.end - piece.start) - carried + (overlap - 10) > size


def test_structure_packs_whole_paragraphs_and_carries_the_end_of_one_piece_into_the_next():
    paragraphs = [f"Paragraph {index} says " + "something useful here " * 3 for index in range(6)]
    text = "# Leave\n\n" + "\n\n".join(paragraph.strip() for paragraph in paragraphs)
    pieces = chunk(text, "structure", size=200, overlap=40)
    assert len(pieces) > 1
    for previous, piece in pairwise(pieces):
        carried = previous.end - piece.start
        assert 30 <= carried <= 40
        assert piece.text.startswith(previous.text[-carried:])
        # The piece closes where a paragraph ends: packing never splits a paragraph that fits.
        assert text[previous.end : previous.end + 2] == "\n\n"


def test_structure_does_not_carry_overlap_across_a_heading():
    text = "# A\n\n" + "alpha " * 50 + "\n\n# B\n\n" + "beta " * 10
    pieces = chunk(text, "structure", size=120, overlap=30)
    first_b = next(piece for piece in pieces if piece.section == "B")
    assert first_b.text.startswith("# B")


def test_structure_hard_splits_a_paragraph_longer_than_the_size_keeping_the_overlap():
    text = " ".join(f"w{index:03d}" for index in range(300))  # 5-character steps, one paragraph
    pieces = chunk(text, "structure", size=100, overlap=20)
    assert all(len(piece.text) <= 100 for piece in pieces)
    for previous, piece in pairwise(pieces):
        assert 15 <= previous.end - piece.start <= 20
        assert re.fullmatch(r"(w\d{3} ?)+", piece.text)  # cut between words


def test_structure_splits_an_unspaced_paragraph_by_characters_with_overlap():
    pieces = chunk("漢" * 250, "structure", size=100, overlap=10)
    assert [(piece.start, piece.end) for piece in pieces] == [(0, 100), (90, 190), (180, 250)]


def test_structure_keeps_at_most_240_pieces_per_document_and_says_how_many_it_dropped():
    text = "\n\n".join(f"Paragraph number {index} of a very long document." for index in range(400))
    pieces = chunk(text, "structure", size=60, overlap=0)
    assert len(pieces) == MAX_PARAGRAPHS_PER_DOCUMENT
    assert pieces.truncated and pieces.dropped == 160
    assert pieces[0].text == "Paragraph number 0 of a very long document."
    assert pieces[-1].text == "Paragraph number 239 of a very long document."


def test_structure_within_the_cap_is_not_truncated():
    pieces = chunk("one\n\ntwo", "structure")
    assert pieces == [Piece("one\n\ntwo", 0, 8, "Document")]
    assert not pieces.truncated and pieces.dropped == 0


# --- tokens and window, with words as tokens -----------------------------------------------------


class WordTokens:
    """A fake embedder that counts each run of non-whitespace as one token."""

    def __init__(self, window: int | None = 8, can_count: bool = True) -> None:
        self.window = window
        self.can_count = can_count

    def token_spans(self, text):
        return [match.span() for match in re.finditer(r"\S+", text)] if self.can_count else None

    def count_tokens(self, text):
        return len(re.findall(r"\S+", text)) if self.can_count else None

    def window_end_char(self, text, window):
        if not self.can_count:
            return None
        spans = self.token_spans(text)
        return len(text) if len(spans) <= window else spans[window - 1][1]


def word_count(text: str) -> int:
    return len(re.findall(r"\S+", text))


@FAST
@given(texts, st.integers(1, 30), st.integers(0, 29))
def test_tokens_windows_hold_size_tokens_and_share_overlap_tokens(text, size, overlap):
    overlap = min(overlap, size - 1)
    pieces = chunk(text, "tokens", size=size, overlap=overlap, tokens=WordTokens())
    assert_well_formed(text, pieces, ordered_without_overlap=overlap == 0)
    assert all(word_count(piece.text) <= size for piece in pieces)
    for previous, piece in pairwise(pieces):
        assert (
            word_count(text[piece.start : previous.end]) == overlap
            if overlap
            else piece.start >= previous.end
        )


def test_tokens_step_by_size_minus_overlap():
    text = " ".join(f"t{index}" for index in range(10))
    pieces = chunk(text, "tokens", size=4, overlap=1, tokens=WordTokens())
    assert [piece.text for piece in pieces] == ["t0 t1 t2 t3", "t3 t4 t5 t6", "t6 t7 t8 t9"]


def test_tokens_refused_without_an_embedder_that_can_split_tokens():
    with pytest.raises(ChunkingError):
        chunk("text", "tokens")
    with pytest.raises(ChunkingError):
        chunk("text", "tokens", tokens=WordTokens(can_count=False))


@FAST
@given(texts, st.integers(1, 20))
def test_window_pieces_each_fit_the_window_and_cover_the_text(text, window):
    pieces = chunk(text, "window", size=window, tokens=WordTokens(window=None))
    assert_well_formed(text, pieces, ordered_without_overlap=True)
    assert all(word_count(piece.text) <= window for piece in pieces)


def test_window_uses_the_embedders_own_window_when_no_size_is_set():
    text = "One two three four.\n\nFive six seven eight nine ten."
    pieces = chunk(text, "window", tokens=WordTokens(window=6))
    assert [piece.text for piece in pieces] == ["One two three four.", "Five six seven eight nine ten."]


def test_window_refused_when_the_embedder_cannot_count_or_has_no_window():
    with pytest.raises(ChunkingError):
        chunk("text", "window")
    with pytest.raises(ChunkingError):
        chunk("text", "window", tokens=WordTokens(window=None))
    with pytest.raises(ChunkingError):
        chunk("text", "window", tokens=WordTokens(can_count=False))


@pytest.mark.parametrize("method", ["fixed", "structure", "tokens", "window"])
def test_whitespace_only_text_gives_no_pieces(method):
    assert chunk(" \n\n\t ", method, tokens=WordTokens()) == []


def test_an_empty_overlap_too_large_for_a_small_size_shrinks_in_proportion():
    assert resolve_sizes("structure", 100) == (100, 10)
    assert resolve_sizes("tokens", 20) == (20, 3)
    assert resolve_sizes("tokens", 100) == (100, 32)


def test_a_table_longer_than_the_size_is_divided_between_rows_and_carries_no_overlap():
    rows = "\n".join(f"| E{n:03d} | the pump stalled at stage {n} |" for n in range(60))
    text = (
        "# Codes\n\nIntro sentence.\n\n| Code | Meaning |\n| --- | --- |\n" + rows + "\n\nClosing words here."
    )
    pieces = chunk(text, "structure", size=300, overlap=60)
    table_pieces = [p for p in pieces if "| E0" in p.text]
    assert len(table_pieces) > 3
    for piece in table_pieces:
        for line in piece.text.split("\n"):
            if line.startswith("|"):
                assert line.endswith("|"), line  # never a row cut in two
    covered = "\n".join(p.text for p in table_pieces)
    for n in range(60):
        assert covered.count(f"| E{n:03d} |") == 1  # every row once: nothing carried over
    assert all(text[p.start : p.end] == p.text for p in pieces)


def test_a_single_row_longer_than_the_size_is_still_split_at_whitespace():
    text = "| A | B |\n| --- | --- |\n| " + "word " * 100 + "| x |"
    pieces = chunk(text, "structure", size=120, overlap=0)
    assert all(len(p.text) <= 120 for p in pieces)
    squeezed = "".join(p.text.replace(" ", "").replace("\n", "") for p in pieces)
    assert squeezed == text.replace(" ", "").replace("\n", "")


# --- sentences (issue 30, item 7) ----------------------------------------------------------------

SENTENCES = " ".join(
    f"Sentence number {i} says something about topic {i} in several words." for i in range(40)
)


def test_a_long_paragraph_is_split_at_a_sentence_end_when_one_is_near_the_window_end():
    pieces = chunk(SENTENCES, "structure", size=400, overlap=0)
    assert len(pieces) > 3
    assert all(piece.text.endswith("words.") for piece in pieces)
    assert all(len(piece.text) <= 400 for piece in pieces)


def test_the_next_piece_starts_at_a_sentence_not_inside_one():
    for overlap in (0, 60, 180):
        pieces = chunk(SENTENCES, "structure", size=400, overlap=overlap)
        assert all(piece.text.startswith("Sentence number") for piece in pieces), overlap


def test_an_overlap_holding_a_sentence_start_begins_there():
    text = "A first short one. " * 30 + "Then a sentence without any end in sight goes on and on " * 3
    pieces = chunk(text.strip(), "structure", size=300, overlap=100)
    assert pieces[1].text.startswith("A first short one.") and pieces[1].start < pieces[0].end


def test_without_a_sentence_end_near_the_split_falls_back_to_whitespace():
    words = "word " * 200
    pieces = chunk(words.strip(), "structure", size=100, overlap=0)
    assert all(piece.text.replace("word", "").strip() == "" for piece in pieces)
    assert all(len(piece.text) <= 100 for piece in pieces)
