"""The record-node division of seed 002 section 2, rule by rule, then its invariants under hypothesis.

`divide(text, window_end_char)`: the callback says how many leading characters of the text it is
given fit the window (its length when all of it fits, None when it cannot tell).
"""

import re
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from ragsite.division import divide

FAST = settings(max_examples=80, deadline=None)


def chars(limit: int):
    """A window of ``limit`` characters."""
    return lambda text: min(len(text), limit)


def words(limit: int):
    """A window of ``limit`` tokens where a token is a run of non-whitespace; it closes after the last one."""

    def window_end_char(text: str) -> int:
        spans = [match.span() for match in re.finditer(r"\S+", text)]
        return len(text) if len(spans) <= limit else spans[limit - 1][1]

    return window_end_char


def nodes(text: str, spans) -> list[str]:
    return [text[start:end] for start, end in spans]


# --- fitting, and unknown ------------------------------------------------------------------------


def test_text_that_fits_is_a_single_node():
    assert divide("short text", chars(100)) == [(0, 10)]


def test_empty_text_is_one_empty_span_and_still_asks_the_window():
    asked = []
    assert divide("", lambda text: asked.append(text) or len(text)) == [(0, 0)]
    assert asked == [""]


def test_a_callback_that_cannot_tell_gives_none_never_fits():
    assert divide("anything at all", lambda text: None) is None


def test_none_on_a_later_node_still_gives_none():
    answers = iter([20, None])
    assert divide("word " * 10, lambda text: next(answers)) is None


def test_the_callback_is_asked_about_the_remaining_text_each_time():
    text = "alpha beta gamma delta epsilon zeta eta theta"
    asked = []

    def window_end_char(remaining):
        asked.append(remaining)
        return min(len(remaining), 12)

    spans = divide(text, window_end_char)
    assert asked == [text[start:] for start, _ in spans]


def test_an_answer_past_the_end_counts_as_fits():
    assert divide("abc", lambda text: len(text) + 5) == [(0, 3)]


# --- boundary classes, in order ------------------------------------------------------------------


def test_a_blank_line_is_preferred_to_a_later_line_break_sentence_end_or_space():
    text = "First paragraph runs on here.\n\nSecond line\nthen. More words here and more"
    spans = divide(text, chars(60))
    assert nodes(text, spans)[0] == "First paragraph runs on here.\n\n"


def test_a_line_break_is_taken_when_there_is_no_blank_line():
    text = "a list item that runs long\n- another item. With a sentence and more words"
    assert nodes(text, divide(text, chars(50)))[0] == "a list item that runs long\n"


def test_a_sentence_end_is_taken_when_there_is_no_line_break():
    text = "One whole sentence is here. And the next one goes on past the window"
    assert nodes(text, divide(text, chars(45)))[0] == "One whole sentence is here. "


def test_whitespace_is_taken_when_there_is_no_sentence_end():
    text = "words without any stop at all go on and on and on"
    assert nodes(text, divide(text, chars(20)))[0] == "words without any "


def test_with_no_boundary_at_all_the_cut_is_at_the_window():
    text = "x" * 250
    assert divide(text, chars(100)) == [(0, 100), (100, 200), (200, 250)]


# --- the half-window rule ------------------------------------------------------------------------


def test_a_boundary_leaving_less_than_half_the_window_is_skipped_for_the_next_class():
    # The blank line would leave a 6-character node out of a 40-character window: not taken.
    text = "Title\n\nthe paragraph under it goes on for quite a while longer"
    first = nodes(text, divide(text, chars(40)))[0]
    assert first == "Title\n\nthe paragraph under it goes on "


def test_a_boundary_at_exactly_half_the_window_is_taken():
    text = "a" * 9 + "\n\n" + "b" * 40  # the blank line ends at 11; half of 22 is 11
    assert nodes(text, divide(text, chars(22)))[0] == "a" * 9 + "\n\n"


def test_when_every_class_is_too_early_the_cut_is_at_the_window():
    text = "ab cd. e\n\n" + "f" * 100
    assert divide(text, chars(30))[0] == (0, 30)


# --- sentence ends -------------------------------------------------------------------------------


def test_a_full_width_stop_ends_a_sentence_with_no_space_after_it():
    text = "これは最初の文です。次の文はとても長くて窓を越えてしまいます"
    assert nodes(text, divide(text, chars(20)))[0] == "これは最初の文です。"


def test_every_full_width_stop_counts():
    for stop in "。．！？":
        text = "甲乙丙丁戊己庚辛" + stop + "壬癸" * 10
        assert nodes(text, divide(text, chars(12)))[0] == "甲乙丙丁戊己庚辛" + stop


def test_a_decimal_point_is_not_a_sentence_end():
    text = "The value of pi is about 3.14159 and it goes on"
    first = nodes(text, divide(text, chars(30)))[0]
    assert first == "The value of pi is about "  # whitespace, not "...about 3."


def test_a_file_extension_is_not_a_sentence_end():
    text = "Open the file named report.txt before the meeting starts"
    assert nodes(text, divide(text, chars(28)))[0] == "Open the file named "


def test_a_half_width_stop_before_whitespace_is_a_sentence_end():
    for stop in ".!?":
        text = f"Short sentence here{stop} Then another follows it on"
        assert nodes(text, divide(text, chars(30)))[0] == f"Short sentence here{stop} "


def test_a_closing_quote_stays_with_its_sentence():
    text = 'He said "stop here." Then everyone walked on and on'
    assert nodes(text, divide(text, chars(30)))[0] == 'He said "stop here." '


# --- where the cut goes --------------------------------------------------------------------------


def test_the_cut_is_after_the_separator_and_the_whitespace_that_follows_it():
    text = "First paragraph is here.\n\n   \n\n  Second paragraph goes on and on and on"
    first, second = nodes(text, divide(text, chars(45)))[:2]
    assert first == "First paragraph is here.\n\n   \n\n  "
    assert second.startswith("Second")


def test_whitespace_after_the_separator_is_only_taken_as_far_as_the_window():
    text = "abcdefghij\n" + " " * 20 + "klm"
    assert divide(text, chars(15))[0] == (0, 15)


def test_a_crlf_line_break_is_never_split():
    text = "line one is here\r\nline two is here and goes on"
    assert nodes(text, divide(text, chars(24)))[0] == "line one is here\r\n"


def test_a_callback_answering_zero_still_makes_progress_one_character_at_a_time():
    assert divide("abc", lambda text: 0) == [(0, 1), (1, 2), (2, 3)]


# --- invariants ----------------------------------------------------------------------------------

PIECES = [
    "word", "sentence.", "3.14", "file.txt", "e.g.", "これは文です。", "次！", "漢字", "z" * 70,
    " ", " ", "  ", "\t", "\n", "\n\n", "\n \n", "\r\n", "\u3000", ". ", "? ", "!",
]  # fmt: skip
texts = st.lists(st.sampled_from(PIECES) | st.text(max_size=8), max_size=120).map("".join)


def assert_partition(text: str, spans) -> None:
    assert spans[0][0] == 0 and spans[-1][1] == len(text)
    for (_, end), (start, _) in pairwise(spans):
        assert end == start
    assert all(start < end for start, end in spans) or spans == [(0, 0)]


@FAST
@given(texts, st.integers(1, 120))
def test_nodes_partition_the_text_and_each_fits_a_character_window(text, limit):
    window_end_char = chars(limit)
    spans = divide(text, window_end_char)
    assert_partition(text, spans)
    for start, end in spans:
        assert window_end_char(text[start:end]) == end - start


@FAST
@given(texts, st.integers(1, 120))
def test_every_node_but_the_last_is_at_least_half_the_window_or_exactly_the_window(text, limit):
    spans = divide(text, chars(limit))
    for start, end in spans[:-1]:
        assert 2 * (end - start) >= limit


@FAST
@given(texts, st.integers(1, 30))
def test_nodes_partition_the_text_and_each_fits_a_word_window(text, limit):
    window_end_char = words(limit)
    spans = divide(text, window_end_char)
    assert_partition(text, spans)
    for start, end in spans:
        assert window_end_char(text[start:end]) == end - start


@FAST
@given(texts, st.integers(1, 60))
def test_division_is_deterministic(text, limit):
    assert divide(text, chars(limit)) == divide(text, chars(limit))
    assert divide(text, words(limit)) == divide(text, words(limit))


@FAST
@given(texts, st.integers(1, 60))
def test_no_node_ends_on_a_half_width_stop_inside_a_word(text, limit):
    # A cut right after "." is only ever a sentence end or a hard cut at the window.
    for start, end in divide(text, chars(limit))[:-1]:
        if text[end - 1] in ".!?" and not text[end].isspace():
            assert end - start == limit


@FAST
@given(texts, st.integers(2, 60), st.integers(0, 200))
def test_none_from_any_call_gives_none(text, limit, fail_after):
    calls = 0

    def window_end_char(remaining):
        nonlocal calls
        calls += 1
        return None if calls > fail_after else min(len(remaining), limit)

    expected_calls = len(divide(text, chars(limit)))
    result = divide(text, window_end_char)
    assert (result is None) == (fail_after < expected_calls)
