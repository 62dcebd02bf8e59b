"""collections_app.text.stitch: hits come back with readable neighbours of their own document only."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collections_app.text.chunking import chunk
from collections_app.text.stitch import Row, cut_hidden_overlap, join_rows, stitch


def plain_rows(layout: list[int], unreadable: frozenset[int] = frozenset()) -> dict[int, Row]:
    """Documents of ``layout[d]`` paragraphs each, ordinals running on across them.

    Paragraph texts are "d<document>p<ordinal>", one space apart in their document, so that no
    two overlap; ``unreadable`` ordinals are left out.
    """
    rows: dict[int, Row] = {}
    ordinal = 0
    for document, size in enumerate(layout):
        start = 0
        for position in range(size):
            text = f"d{document}p{ordinal}"
            if ordinal not in unreadable:
                rows[ordinal] = Row(
                    ordinal, document, start, start + len(text), text, f"s{ordinal}", index=position
                )
            start += len(text) + 1
            ordinal += 1
    return rows


# --- hand cases ---------------------------------------------------------------------------


def test_two_hits_next_to_each_other_merge_into_one_run():
    rows = plain_rows([6])
    [run] = stitch([(2, 0.4), (3, 0.7)], rows, around=1)
    assert (run.first, run.last, run.passages) == (1, 4, 4)
    assert run.text == "d0p1 d0p2 d0p3 d0p4"


def test_runs_that_only_touch_merge_when_around_is_positive():
    rows = plain_rows([8])
    # around 1: hit 1 spans 0..2 and hit 4 spans 3..5, which touch.
    [run] = stitch([(1, 0.5), (4, 0.6)], rows, around=1)
    assert (run.first, run.last, run.passages) == (0, 5, 6)


def test_around_zero_returns_each_hit_alone_even_beside_another():
    rows = plain_rows([5])
    runs = stitch([(2, 0.5), (3, 0.9), (2, 0.8)], rows, around=0)
    assert [(r.first, r.last, r.passages, r.score) for r in runs] == [(3, 3, 1, 0.9), (2, 2, 1, 0.8)]


def test_an_unreadable_paragraph_breaks_the_run():
    rows = plain_rows([6], unreadable=frozenset({2}))
    runs = stitch([(1, 0.9), (3, 0.5)], rows, around=2)
    assert [(r.first, r.last) for r in runs] == [(0, 1), (3, 5)]
    assert all("d0p2" not in r.text for r in runs)


def test_a_run_never_crosses_into_the_next_document():
    rows = plain_rows([3, 3])  # document 0 is ordinals 0..2, document 1 is 3..5
    [run] = stitch([(2, 0.5)], rows, around=2)
    assert (run.first, run.last, run.document) == (0, 2, 0)
    runs = stitch([(2, 0.5), (3, 0.6)], rows, around=1)
    assert [(r.first, r.last, r.document) for r in runs] == [(3, 4, 1), (1, 2, 0)]


def test_rows_are_joined_with_a_single_space():
    assert join_rows(list(plain_rows([2]).values())) == "d0p0 d0p1"


def test_text_shared_by_overlapping_chunks_is_not_repeated():
    document = "alpha beta gamma delta epsilon"
    first = Row(0, 0, 0, 16, document[0:16], "")  # "alpha beta gamma"
    overlapping = Row(1, 0, 11, 22, document[11:22], "")  # "gamma delta"
    assert join_rows([first, overlapping]) == "alpha beta gamma delta"
    # The overlap ends inside a word: the rest of the word is glued on, not spaced off.
    cut = Row(0, 0, 0, 13, document[0:13], "")  # "alpha beta ga"
    assert join_rows([cut, overlapping]) == "alpha beta gamma delta"
    # The overlap ends just before a space: the space collapses to one.
    before_space = Row(1, 0, 6, 22, document[6:22], "")  # "beta gamma delta"
    assert join_rows([Row(0, 0, 0, 10, "alpha beta", ""), before_space]) == "alpha beta gamma delta"
    # A chunk wholly inside what came before adds nothing.
    inside = Row(1, 0, 6, 10, "beta", "", 1)
    tail = Row(2, 0, 17, 30, "delta epsilon", "", 2)
    assert join_rows([first, inside, tail]) == "alpha beta gamma delta epsilon"


def test_a_run_scores_its_best_hit_and_takes_that_hits_section():
    rows = plain_rows([6])
    [run] = stitch([(1, 0.3), (3, 0.8), (2, 0.5)], rows, around=1)
    assert run.score == 0.8
    assert run.section == "s3"
    assert (run.first, run.last) == (0, 4)


def test_runs_are_ordered_by_score_then_first_ordinal():
    rows = plain_rows([2, 2, 2])
    runs = stitch([(4, 0.5), (0, 0.5), (2, 0.9)], rows, around=0)
    assert [r.first for r in runs] == [2, 0, 4]


def test_a_hit_the_reader_may_not_read_is_refused():
    with pytest.raises(ValueError):
        stitch([(2, 0.5)], plain_rows([4], unreadable=frozenset({2})), around=1)
    with pytest.raises(ValueError):
        stitch([(1, 0.5)], plain_rows([4]), around=-1)


def test_no_hits_stitch_to_nothing():
    assert stitch([], plain_rows([3]), around=2) == []


# --- properties ---------------------------------------------------------------------------


@st.composite
def scenarios(draw):
    layout = draw(st.lists(st.integers(1, 6), min_size=1, max_size=5))
    total = sum(layout)
    unreadable = draw(st.frozensets(st.integers(0, total - 1), max_size=total - 1))
    rows = plain_rows(layout, unreadable)
    hit_ordinals = draw(st.lists(st.sampled_from(sorted(rows)), min_size=1, max_size=8))
    scores = draw(
        st.lists(
            st.sampled_from([0.1, 0.3, 0.5, 0.7, 0.9]), min_size=len(hit_ordinals), max_size=len(hit_ordinals)
        )
    )
    around = draw(st.integers(0, 3))
    return rows, list(zip(hit_ordinals, scores, strict=True)), around


@settings(max_examples=300)
@given(scenarios())
def test_stitching_invariants(scenario):
    rows, hits, around = scenario
    runs = stitch(hits, rows, around)
    best: dict[int, float] = {}
    for ordinal, score in hits:
        best[ordinal] = max(score, best.get(ordinal, score))

    for run in runs:
        members = [rows.get(ordinal) for ordinal in range(run.first, run.last + 1)]
        # Every row is readable, so nothing outside `readable` and no gap is closed over.
        assert all(member is not None for member in members)
        # One document only.
        assert {member.document for member in members} == {run.document}
        assert run.passages == run.last - run.first + 1
        # No overlaps in this layout: the text is the rows' texts joined by single spaces.
        assert run.text == " ".join(member.text for member in members)
        inside = [ordinal for ordinal in best if run.first <= ordinal <= run.last]
        assert inside, "a run holds at least one hit"
        assert run.score == max(best[ordinal] for ordinal in inside)
        top = min(o for o in inside if best[o] == run.score)
        assert run.section == rows[top].section
        # At most `around` beyond the outermost hits, and as far as it may reach.
        assert run.first >= min(inside) - around and run.last <= max(inside) + around
        before, after = rows.get(run.first - 1), rows.get(run.last + 1)
        if run.first > min(inside) - around:
            assert before is None or before.document != run.document
        if run.last < max(inside) + around:
            assert after is None or after.document != run.document
        if around == 0:
            assert run.passages == 1

    # Every hit in exactly one run.
    for ordinal in best:
        assert sum(run.first <= ordinal <= run.last for run in runs) == 1
    # Runs are disjoint, and with around > 0 none of one document touch (they would have merged).
    ordered = sorted(runs, key=lambda run: run.first)
    for previous, following in zip(ordered, ordered[1:], strict=False):
        assert previous.last < following.first
        if around > 0 and previous.document == following.document:
            assert following.first > previous.last + 1
    # Best score first, ties by first ordinal.
    assert [(-run.score, run.first) for run in runs] == sorted((-run.score, run.first) for run in runs)


@st.composite
def overlapping_chunks(draw):
    """Chunks of one whitespace-free text, each starting inside the text before it."""
    text = draw(st.text(alphabet="abcdefgh", min_size=2, max_size=60))
    spans = []
    start, covered = 0, draw(st.integers(1, len(text)))
    spans.append((start, covered))
    for _ in range(draw(st.integers(0, 6))):
        start = draw(st.integers(start, covered - 1))
        end = draw(st.integers(start + 1, len(text)))
        spans.append((start, end))
        covered = max(covered, end)
    return text, spans


@given(overlapping_chunks())
def test_overlapping_chunks_join_to_the_document_text_without_repeats(case):
    text, spans = case
    rows = [Row(i, 0, start, end, text[start:end], "", i) for i, (start, end) in enumerate(spans)]
    assert join_rows(rows) == text[spans[0][0] : max(end for _, end in spans)]


@given(st.lists(st.text(alphabet="abc", min_size=1, max_size=5), min_size=1, max_size=8), st.data())
def test_word_aligned_overlaps_read_as_the_document(words, data):
    # Chunks are runs of whole words; each starts at or before the word after the last one.
    document = " ".join(words)
    offsets = []
    position = 0
    for word in words:
        offsets.append((position, position + len(word)))
        position += len(word) + 1
    spans = []
    first_word, last_word = 0, data.draw(st.integers(0, len(words) - 1))
    spans.append((first_word, last_word))
    while last_word < len(words) - 1:
        first_word = data.draw(st.integers(first_word, last_word + 1))
        last_word = data.draw(st.integers(max(first_word, last_word + 1), len(words) - 1))
        spans.append((first_word, last_word))
    rows = [
        Row(i, 0, offsets[a][0], offsets[b][1], document[offsets[a][0] : offsets[b][1]], "", i)
        for i, (a, b) in enumerate(spans)
    ]
    assert join_rows(rows) == document


# --- overlap never carries text across a label boundary ------------------------------------

LEAK = 20  # a returned substring this long that occurs only in hidden text is a leak


class ReaderView(Mapping):
    """What the search service hands to stitch: readable rows by ordinal, each cut by cut_hidden_overlap."""

    def __init__(self, rows: list[Row], readable: list[bool]):
        self.rows, self.readable = rows, readable

    def __getitem__(self, ordinal):
        if not 0 <= ordinal < len(self.rows) or not self.readable[ordinal]:
            raise KeyError(ordinal)
        return cut_hidden_overlap(self.rows, ordinal, self.readable)

    def __iter__(self):
        return (i for i, ok in enumerate(self.readable) if ok)

    def __len__(self):
        return sum(self.readable)


def _document(words: int, seed: int) -> str:
    """Prose of distinct words (so any 20 characters of it occur once), with a heading now and then."""
    import random

    rng = random.Random(seed)
    parts = []
    for i in range(words):
        if i and rng.random() < 0.04:
            parts.append(f"\n\n# Heading {i:05d}\n\n")
        elif i and rng.random() < 0.1:
            parts.append("\n\n")
        parts.append(f"w{i:05d}{rng.choice('abcdefgh')}" + ("." if rng.random() < 0.2 else "") + " ")
    return "".join(parts).strip()


def _hidden_only(text: str, pieces, readable: list[bool]) -> list[str]:
    """Every 20-character stretch of the document whose characters all belong to hidden pieces.

    A character belongs to the earliest piece that covers it: overlap copies the end of a piece
    into the next, so the copy is the earlier piece's text."""
    owner = [None] * len(text)
    for number, piece in reversed(list(enumerate(pieces))):
        owner[piece.start : piece.end] = [number] * (piece.end - piece.start)
    hidden = [o is not None and not readable[o] for o in owner]
    return [text[i : i + LEAK] for i in range(len(text) - LEAK + 1) if all(hidden[i : i + LEAK])]


@settings(max_examples=300, deadline=None)
@given(
    words=st.integers(20, 400),
    seed=st.integers(0, 10_000),
    size=st.integers(60, 400),
    overlap_share=st.floats(0.05, 0.5),
    layout=st.lists(st.booleans(), min_size=1, max_size=400),
    around=st.integers(0, 5),
    hits=st.lists(st.integers(0, 399), max_size=12),
)
def test_no_answer_carries_text_that_only_hidden_paragraphs_hold(
    words, seed, size, overlap_share, layout, around, hits
):
    text = _document(words, seed)
    pieces = list(chunk(text, "structure", size=size, overlap=int(size * overlap_share)))
    rows = [Row(i, 0, p.start, p.end, p.text, p.section) for i, p in enumerate(pieces)]
    readable = [layout[i % len(layout)] for i in range(len(rows))]
    view = ReaderView(rows, readable)
    chosen = [(h % len(rows), 1.0) for h in hits if readable[h % len(rows)]]
    returned = [run.text for run in stitch(chosen, view, around)]
    secrets = _hidden_only(text, pieces, readable)
    for answer in returned:
        assert not [s for s in secrets if s in answer]
    # And what a reader may read is all still there: every readable character outside hidden copies.
    for ordinal in (o for o, _s in chosen):
        row = view[ordinal]
        assert row.text == text[row.start : row.end]


def test_the_review_case_the_tail_of_a_secret_piece_is_cut_from_the_next_public_one():
    text = ("Public opening about leave. " * 8) + "The acquisition target is Hooli at ninety million. "
    text += "Public closing words about travel and expenses follow here. " * 6
    pieces = list(chunk(text, "structure", size=200, overlap=120))
    secret = next(i for i, p in enumerate(pieces) if "Hooli" in p.text)
    assert "Hooli" in pieces[secret + 1].text  # the overlap copied it into the next, public, piece
    readable = [i != secret for i in range(len(pieces))]
    rows = [Row(i, 0, p.start, p.end, p.text, "") for i, p in enumerate(pieces)]
    after = ReaderView(rows, readable)[secret + 1]
    assert "Hooli" not in after.text and after.start == pieces[secret].end
    assert after.text == text[pieces[secret].end : pieces[secret + 1].end]
    # A reader who may read the secret piece gets the next one whole.
    assert ReaderView(rows, [True] * len(rows))[secret + 1] == rows[secret + 1]
