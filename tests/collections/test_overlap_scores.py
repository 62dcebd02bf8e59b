"""Issue 15, *Overlap* and *Statistics*: a readable row's score never counts text that only paragraphs
the reader may not read hold — not the opening the structure strategy copied into it from a hidden
neighbour, on the lexical arm (its terms and length, and the view's df, N and avgdl) as on the vector
arm (builds embed a row from the end of what it shares with earlier rows). Pure: no database."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collections_app.index.mapped import MappedIndex
from collections_app.index.writer import IndexWriter
from collections_app.text.chunking import chunk
from collections_app.text.stitch import carried_openings, carried_terms_text, fresh_text
from ragsite.lexical import BM25Index, terms

QUESTIONS = [
    "w00010a w00011b",
    "heading w00002c w00003d w00003d",
    "w00050a w00051b w00052c w00053d",
    "nothing",
]


def _document(words: int, seed: int) -> str:
    """Prose of numbered words in a few letters, so questions find several of them; headings now and then."""
    rng = random.Random(seed)
    parts = []
    for i in range(words):
        if i and rng.random() < 0.04:
            parts.append(f"\n\n# Heading {i % 7}\n\n")
        elif i and rng.random() < 0.1:
            parts.append("\n\n")
        parts.append(f"w{i % 60:05d}{rng.choice('abcd')}" + ("." if rng.random() < 0.2 else "") + " ")
    return "".join(parts).strip()


def _disguised(text: str, seed: int) -> str:
    """``text`` with every letter and digit replaced by another of its kind: the chunker cuts it the same."""
    rng = random.Random(seed)
    return "".join(
        rng.choice("efghijk") if ch.isalpha() else rng.choice("0123456789") if ch.isdigit() else ch
        for ch in text
    )


def _index(tmp_path, documents: list[str], size: int, overlap: int, key: str):
    """The rows of ``documents`` (structure chunking) and their index, written as services.indexes writes
    it."""
    rows = []  # (document, start, end, text)
    for number, text in enumerate(documents):
        rows.extend(
            (number, p.start, p.end, p.text) for p in chunk(text, "structure", size=size, overlap=overlap)
        )
    openings = list(carried_openings((d, s, e) for d, s, e, _t in rows))
    main, carried = IndexWriter(0), IndexWriter(0)
    ids, docs = list(range(len(rows))), [r[0] for r in rows]
    main.add(ids, docs, [terms(r[3]) for r in rows], [None] * len(rows))
    carried.add(
        ids,
        docs,
        [terms(carried_terms_text(r[3], n)) for r, (n, _f) in zip(rows, openings, strict=True)],
        [None] * len(rows),
    )
    carried.arrays["carried_from.i32"] = np.asarray([f for _n, f in openings], dtype=np.int32)
    return rows, openings, MappedIndex(main.write(tmp_path, key, parts={"carried": carried}))


def test_a_rows_carried_opening_runs_to_the_furthest_end_before_it_within_its_document():
    rows = [(1, 0, 100), (1, 80, 200), (1, 150, 260), (1, 250, 300), (2, 0, 50), (2, 60, 90)]
    assert list(carried_openings(rows)) == [(0, 0), (20, 0), (50, 1), (10, 2), (0, 4), (0, 5)]


def test_the_carried_terms_are_always_some_of_the_rows_own():
    # A hard cut inside a long word: the whole word is left out, never half of it counted as a term.
    text = "abcdefghij klm nop"
    assert carried_terms_text(text, 4) == "abcdefghij"
    assert carried_terms_text(text, 10) == "abcdefghij"
    assert carried_terms_text(text, 11) == "abcdefghij "
    assert carried_terms_text(text, 0) == "" and fresh_text(text, 11) == "klm nop"


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(10, 250), min_size=1, max_size=4),
    seed=st.integers(0, 10_000),
    size=st.integers(80, 400),
    overlap_share=st.floats(0.1, 0.6),
    layout=st.lists(st.booleans(), min_size=1, max_size=60),
)
def test_a_readers_bm25_is_that_of_its_rows_less_what_they_share_with_hidden_ones(
    tmp_path_factory, sizes, seed, size, overlap_share, layout
):
    """Exactly seed 004's BM25 over the reader's rows, each row that shares text with a hidden one
    taken from the end of its carried opening (so df, N, avgdl and tf all leave the copy out)."""
    documents = [_document(words, seed + n) for n, words in enumerate(sizes)]
    rows, openings, index = _index(
        tmp_path_factory.mktemp("i"), documents, size, int(size * overlap_share), "k"
    )
    mask = np.asarray([layout[i % len(layout)] for i in range(len(rows))])
    view = index.view(mask, cut_carried=True)
    readable = np.flatnonzero(mask)
    if readable.size == 0:
        return
    seen = []
    for r in readable:
        behind = [j for j in range(r) if rows[j][0] == rows[r][0] and rows[j][2] > rows[r][1]]
        cut = any(not mask[j] for j in behind)
        text = rows[r][3]
        seen.append(text[len(carried_terms_text(text, openings[r][0])) :] if cut else text)
    reference = BM25Index.from_texts(seen)
    for question in QUESTIONS:
        scores, upper = index.bm25(terms(question), view)
        assert scores[readable] == pytest.approx(reference.scores(terms(question)), rel=1e-12, abs=1e-12)
        assert upper == pytest.approx(reference.upper_bound(terms(question)), rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(
    words=st.integers(20, 300),
    seed=st.integers(0, 10_000),
    size=st.integers(60, 400),
    overlap_share=st.floats(0.05, 0.6),
    layout=st.lists(st.booleans(), min_size=2, max_size=40),
)
def test_scores_of_readable_rows_do_not_change_with_the_text_of_hidden_ones(
    tmp_path_factory, words, seed, size, overlap_share, layout
):
    """Hidden paragraphs with the question's words, or with other words in their place: every readable
    row scores the same, to the last bit, and the bound is the same."""
    text = _document(words, seed)
    pieces = list(chunk(text, "structure", size=size, overlap=int(size * overlap_share)))
    readable = [layout[i % len(layout)] for i in range(len(pieces))]
    # Every character only hidden pieces hold (a copy belongs to the earlier piece) disguised.
    owner = [None] * len(text)
    for number, piece in reversed(list(enumerate(pieces))):
        owner[piece.start : piece.end] = [number] * (piece.end - piece.start)
    other = "".join(
        _disguised(ch, seed + i) if owner[i] is not None and not readable[owner[i]] else ch
        for i, ch in enumerate(text)
    )
    root = tmp_path_factory.mktemp("h")
    rows_a, _o, plain = _index(root, [text], size, int(size * overlap_share), "a")
    rows_b, _o, changed = _index(root, [other], size, int(size * overlap_share), "b")
    assert [(s, e) for _d, s, e, _t in rows_a] == [(s, e) for _d, s, e, _t in rows_b]
    mask = np.asarray(readable)
    for question in QUESTIONS:
        a, bound_a = plain.bm25(terms(question), plain.view(mask, cut_carried=True))
        b, bound_b = changed.bm25(terms(question), changed.view(mask, cut_carried=True))
        assert np.array_equal(a[mask], b[mask]) and bound_a == bound_b


def test_without_the_cut_a_hidden_neighbours_words_reach_the_next_rows_score(tmp_path):
    """The oracle this closes: the copied tail of a hidden piece made the next, readable, piece match."""
    text = ("Public opening about leave. " * 8) + "The acquisition target is Hooli at ninety million. "
    text += "Public closing words about travel and expenses follow here. " * 6
    rows, _openings, index = _index(tmp_path, [text], 200, 120, "r")
    secret = next(i for i, r in enumerate(rows) if "Hooli" in r[3])
    assert "Hooli" in rows[secret + 1][3]
    mask = np.asarray([i != secret for i in range(len(rows))])
    leaky, _ = index.bm25(terms("hooli acquisition"), index.view(mask))
    closed, _ = index.bm25(terms("hooli acquisition"), index.view(mask, cut_carried=True))
    assert leaky[secret + 1] > 0 and closed[mask].max() == 0
    # A reader who may read the secret piece scores the next one on all of its text.
    whole, _ = index.bm25(terms("hooli"), index.view(np.ones(len(rows), dtype=bool), cut_carried=True))
    assert whole[secret + 1] > 0
