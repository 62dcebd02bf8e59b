"""Whether and how a record divides (memory_app.nodes): pure, no database.

Invariants 3-5 of seed 002 §5 are checked here under hypothesis as well as by the service
tests: every node fits its window counted on its own span, nodes partition the text, and
division is deterministic.
"""

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_app.nodes import DIVIDED, FITS, UNKNOWN, divide_record, runs_past_window
from ragsite.embedders import HashEmbedder, NoneEmbedder

from .conftest import WINDOW, prose

FAST = settings(max_examples=60, deadline=None)


def test_a_record_that_fits_has_no_nodes(embedder):
    division = divide_record("a few words only", embedder)
    assert division.status == FITS
    assert division.spans == []
    assert division.tokens == 4 + 2


def test_exactly_the_window_still_fits_and_one_more_token_runs_past():
    embedder = HashEmbedder(window=10)
    assert divide_record(" ".join(["w"] * 8), embedder).status == FITS  # 8 words + 2 special tokens
    assert divide_record(" ".join(["w"] * 9), embedder).status == DIVIDED
    assert runs_past_window(11, 10) and not runs_past_window(10, 10)


def test_unknown_token_counts_build_no_nodes_never_fits():
    assert divide_record(prose(500), NoneEmbedder()).status == UNKNOWN
    assert not runs_past_window(None, 256)
    assert not runs_past_window(300, None)

    class CannotCount(HashEmbedder):
        def count_tokens(self, text):
            return None

    class CannotFindTheWindowEnd(HashEmbedder):
        def window_end_char(self, text, window):
            return None

    assert divide_record(prose(500), CannotCount(window=WINDOW)).status == UNKNOWN
    assert divide_record(prose(500), CannotFindTheWindowEnd(window=WINDOW)).status == UNKNOWN


def test_a_long_record_divides_at_sentence_or_paragraph_ends(embedder):
    text = prose(300, seed=3)
    division = divide_record(text, embedder)
    assert division.status == DIVIDED and len(division.spans) >= 300 // (WINDOW - 2)
    # Every cut but the last lands after a stop (and the whitespace that follows it).
    for span in division.spans[:-1]:
        assert text[: span.end].rstrip().endswith(".")


@FAST
@given(words=st.integers(min_value=0, max_value=700), seed=st.integers(0, 10_000), window=st.integers(3, 80))
def test_nodes_fit_partition_the_text_and_repeat_exactly(words, seed, window):
    embedder = HashEmbedder(window=window)
    text = prose(words, seed)
    division = divide_record(text, embedder)
    if embedder.count_tokens(text) <= window:
        assert division.status == FITS
        return
    spans = division.spans
    # invariant 3: each node's own count is within the window it was cut against
    assert all(span.token_count == embedder.count_tokens(text[span.start : span.end]) for span in spans)
    assert all(span.token_count <= window for span in spans)
    # invariant 4: a partition of [0, len(text))
    assert spans[0].start == 0 and spans[-1].end == len(text)
    assert all(a.end == b.start for a, b in pairwise(spans))
    assert [span.index for span in spans] == list(range(len(spans)))
    # invariant 5: the same text, tokenizer and window give the same nodes
    assert divide_record(text, HashEmbedder(window=window)) == division
