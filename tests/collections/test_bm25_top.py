"""The k best rows by BM25 without summing every posting: the rows kept hold the top, and their scores
are the dense sum's (and so seed 004's) to the bit."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collections_app.index import bm25_top as pruning
from collections_app.index.bm25_top import best_rows, bm25_top
from collections_app.index.mapped import MappedIndex
from collections_app.index.writer import IndexWriter
from collections_app.text.context import lexical_with_context
from ragsite.fusion import hybrid_scores
from ragsite.lexical import BM25Index, terms
from ragsite.top import MARGIN, top_rows

COMMON_WORDS = ["the", "of", "and", "in"]
RARE_WORDS = [f"w{i}" for i in range(40)]


def corpus(seed: int, rows: int) -> list[str]:
    """Texts where a few words are in most rows and many words in a few, as in real text."""
    rng = np.random.default_rng(seed)
    texts = []
    for _ in range(rows):
        words = [w for w in COMMON_WORDS if rng.random() < 0.8] * int(rng.integers(1, 4))
        words += list(rng.choice(RARE_WORDS, size=int(rng.integers(0, 8)), p=_zipf(len(RARE_WORDS))))
        rng.shuffle(words)
        texts.append(" ".join(words))
    return texts


def _zipf(n):
    weights = 1.0 / np.arange(1, n + 1)
    return weights / weights.sum()


def index_of(tmp_path, texts, key="b1", contexts=None):
    def writer_of(texts):
        writer = IndexWriter(4)
        writer.add(
            list(range(100, 100 + len(texts))),
            [i // 5 for i in range(len(texts))],
            [terms(t) for t in texts],
            [None] * len(texts),
        )
        return writer

    parts = None if contexts is None else {"context": writer_of(contexts)}
    return MappedIndex(writer_of(texts).write(tmp_path, key, parts=parts))


def fused(bm25, bound):
    return hybrid_scores(None, bm25, bound, weight=0.52)[0]


@pytest.fixture(autouse=True)
def every_size(monkeypatch):
    monkeypatch.setattr(pruning, "LEAST_ROWS", 0)  # small test indexes take the pruned path too


def test_the_rows_kept_hold_the_top_and_score_exactly_what_every_row_would(tmp_path):
    texts = corpus(1, 400)
    index = index_of(tmp_path, texts)
    question = terms("the w3 of w17 w17 in w30 unknownword")
    found = bm25_top(index, question, 5)
    assert found is not None
    rows, scores, bound = found
    dense, dense_bound = index.bm25(question)
    assert rows.size < index.size // 4  # most rows were never scored
    assert np.array_equal(scores, dense[rows]) and bound == dense_bound
    # Seed 004's own BM25 over the same texts: the same bits.
    seed = BM25Index.from_texts(texts)
    assert np.array_equal(scores, seed.scores(question)[rows]) and bound == seed.upper_bound(question)
    kth = np.sort(dense)[-5]
    assert set(np.flatnonzero(dense >= kth * (1 - MARGIN))) <= set(rows.tolist())


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    k=st.integers(1, 12),
    words=st.lists(st.sampled_from(COMMON_WORDS + RARE_WORDS + ["nowhere"]), min_size=1, max_size=10),
    share=st.sampled_from([None, 0.95, 0.5]),
)
def test_the_best_rows_are_those_of_scoring_every_row_ties_and_all(tmp_path_factory, seed, k, words, share):
    rows = 60 + seed % 300
    index = index_of(tmp_path_factory.mktemp("i"), corpus(seed, rows))
    eligible = None if share is None else np.random.default_rng(seed).random(rows) < share
    dense, bound = index.bm25(words)
    expected = top_rows(fused(dense, bound), eligible, k)
    got = best_rows(index, words, k, eligible, fused)
    if got is not None:  # None: the caller scores every row (nothing common, or too many could reach)
        assert np.array_equal(got[0], expected)
        assert np.array_equal(got[1], fused(dense, bound)[expected])


def test_a_context_field_is_added_as_the_search_adds_it(tmp_path):
    texts = [f"the of and in r{i % 100} s{i % 37} " + "the " * (i % 3) for i in range(2000)]
    contexts = [f"Handbook › {'Leave' if i % 250 == 0 else 'Travel'}" for i in range(2000)]
    index = index_of(tmp_path, texts, contexts=contexts)
    question = terms("the r5 of leave s5 s6 in")
    rows, scores, bound = bm25_top(index, question, 5)
    text, text_bound = index.bm25(question)
    expected, expected_bound = lexical_with_context(text, text_bound, *index.context.bm25(question))
    assert not np.array_equal(expected, text)  # the contexts count
    assert rows.size < index.size // 16
    assert np.array_equal(scores, expected[rows]) and bound == expected_bound
    assert np.array_equal(
        best_rows(index, question, 5, None, fused)[0], top_rows(fused(expected, expected_bound), None, 5)
    )


def test_repeated_texts_tie_and_the_lower_row_wins_as_in_a_full_sort(tmp_path):
    texts = [f"the of and {'w1 w2' if i % 37 == 0 else 'w5'}" for i in range(300)]  # copies: equal scores
    index = index_of(tmp_path, texts)
    rows, values = best_rows(index, ["the", "w1", "w2"], 4, None, fused)
    assert rows.tolist() == [0, 37, 74, 111] and len(set(values.tolist())) == 1


def test_where_pruning_cannot_apply_the_caller_is_told_to_score_every_row(tmp_path, monkeypatch):
    texts = corpus(2, 200)
    index = index_of(tmp_path, texts)
    assert bm25_top(index, ["w1", "w2"], 5) is None  # no common term: nothing to leave out
    assert bm25_top(index, ["the"], 5, np.arange(200) < 3) is None  # fewer eligible rows than wanted
    monkeypatch.setattr(pruning, "LEAST_ROWS", 10_000)
    assert bm25_top(index_of(tmp_path, texts, key="b2"), ["the", "w1"], 5) is None  # small: dense is as quick
