"""A hit's part under the budget (text.budget.best_part): whole sentences holding the question's words,
filled with whole words up to the room it was given, never past it."""

from hypothesis import given, settings
from hypothesis import strategies as st

from collections_app.text.budget import MIN_PART, best_part
from collections_app.text.stitch import Row

WORD = st.text(alphabet="abcdefghij", min_size=1, max_size=12)
SENTENCE = st.lists(WORD, min_size=1, max_size=60).map(lambda words: " ".join(words).capitalize() + ".")


def row_of(text: str) -> Row:
    return Row(ordinal=0, document=1, start=0, end=len(text), text=text, section="", index=0)


def test_a_short_answer_sentence_before_a_long_one_is_filled_to_the_least_part():
    answer = "Laptops lost abroad are reported to the service desk within a day."
    long_sentence = "Afterwards " + " ".join(["the replacement process"] * 40) + " continues."
    opening = "Opening " + " ".join(["words of the policy"] * 20) + "."
    text = opening + " " + answer + " " + long_sentence
    part = best_part(row_of(text), MIN_PART, {"laptops": 2.0, "lost": 1.5})
    assert part.text.startswith(answer)  # 66 characters of whole sentences before the fill
    assert MIN_PART - 25 <= len(part.text) <= MIN_PART
    assert text[part.start : part.end] == part.text and part.cut_after and part.cut_before


def test_a_part_at_the_end_of_its_hit_is_filled_with_the_words_before_it():
    answer = "Laptops lost abroad are reported to the service desk within a day."
    text = "Before " + " ".join(["the earlier steps"] * 40) + " end. " + answer
    part = best_part(row_of(text), MIN_PART, {"laptops": 2.0, "lost": 1.5})
    assert part.text.endswith(answer) and MIN_PART - 25 <= len(part.text) <= MIN_PART
    assert text[part.start : part.end] == part.text and not part.cut_after


@settings(max_examples=300, deadline=None)
@given(st.lists(SENTENCE, min_size=1, max_size=12), st.integers(min_value=20, max_value=900), st.data())
def test_a_part_never_passes_its_room_and_leaves_at_most_a_word_of_it_unused(sentences, room, data):
    text = " ".join(sentences)
    words = sorted({w.lower().strip(".") for w in text.split()})
    chosen = data.draw(st.lists(st.sampled_from(words), max_size=3))
    part = best_part(row_of(text), room, {word: 1.0 for word in chosen})
    assert len(part.text) <= max(room, 0) or len(text) <= room
    assert text[part.start : part.end] == part.text
    if len(text) > room:
        longest = max(len(word) for word in text.split())
        assert len(part.text) >= room - longest - 2


# A licence as a PDF or a plain-text file gives it: every line wrapped at about 70 columns.
WRAPPED = (
    "Corresponding Source conveyed under this section must be accompanied by the\n"
    "Installation Information.  A separable portion of the object code, whose source\n"
    "code is excluded from the Corresponding Source as a System Library, need not be\n"
    "included in conveying the object code work.\n"
    '"Installation Information" for a User Product means any methods, procedures,\n'
    "authorization keys, or other information required to install and execute\n"
    "modified versions of a covered work in that User Product from a modified\n"
    "version of its Corresponding Source.  The information must suffice to ensure\n"
    "that the continued functioning of the modified object code is in no case\n"
    "prevented or interfered with solely because modification has been made.\n"
)


def test_a_part_of_hard_wrapped_prose_starts_at_a_sentence_not_at_a_wrapped_line():
    weights = {"information": 1.0, "install": 2.0, "modified": 1.5, "versions": 1.0, "functioning": 1.0}
    part = best_part(row_of(WRAPPED), MIN_PART, weights)
    assert part.text.startswith('"Installation Information" for a User Product means')
    assert WRAPPED[part.start : part.end] == part.text


def test_lines_that_start_items_or_follow_a_sentence_end_stay_units():
    listing = (
        "Options:\n- keep the notices of the original work intact in every copy\n"
        "- mark modified files with a prominent notice saying what was changed\n"
        + "Unrelated closing words that say nothing of interest here at all. "
        * 6
    )
    part = best_part(row_of(listing), 80, {"modified": 1.0, "notice": 1.0})
    assert part.text.startswith("- mark modified files")
