"""ragsite.lexical against seed 004, checked with a plain, independent implementation."""

from __future__ import annotations

import math
import sys
import unicodedata
from collections import Counter
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ragsite import lexical
from ragsite.lexical import BM25Index, go_lower, terms

# --- an independent reference, written straight from the seed's words -----------------

LETTERS_AND_NUMBERS = {"Lu", "Ll", "Lt", "Lm", "Lo", "Nd", "Nl", "No"}


def reference_lower_rune(ch: str) -> str:
    """Go's unicode.ToLower of one rune: the simple mapping, which for U+0130 is U+0069."""
    if ch == "\u0130":
        return "i"
    lowered = ch.lower()  # one character on its own has no Final_Sigma context
    return lowered if len(lowered) == 1 else ch


def reference_terms(text: str) -> list[str]:
    """Maximal runs of [\\p{L}\\p{N}_], found one character at a time, then lowercased per rune."""
    found: list[str] = []
    current: list[str] = []
    for ch in text:
        if ch == "_" or unicodedata.category(ch) in LETTERS_AND_NUMBERS:
            current.append(ch)
        elif current:
            found.append("".join(current))
            current = []
    if current:
        found.append("".join(current))
    return ["".join(reference_lower_rune(ch) for ch in term) for term in found]


def reference_scores(
    documents: list[list[str]], query: list[str], k1: float = 1.2, b: float = 0.75
) -> list[float]:
    """Seed 004's BM25 with dicts and floats: sum over the query's terms, repeats included."""
    n = len(documents)
    avgdl = sum(len(d) for d in documents) / n
    df: Counter[str] = Counter()
    for document in documents:
        df.update(set(document))
    result = []
    for document in documents:
        tf = Counter(document)
        score = 0.0
        for term in query:
            if tf[term] == 0:
                continue
            idf = math.log(1 + (n - df[term] + 0.5) / (df[term] + 0.5))
            score += idf * tf[term] * (k1 + 1) / (tf[term] + k1 * (1 - b + b * len(document) / avgdl))
        result.append(score)
    return result


# --- terms --------------------------------------------------------------------------------


def test_dotted_capital_i_lowers_to_a_single_ascii_i():
    # Python's str.lower gives "i" + U+0307; Go's simple mapping gives "i" alone.
    assert "İstanbul".lower() == "i\u0307stanbul"
    assert terms("İSTANBUL İstanbul") == ["istanbul", "istanbul"]


def test_capital_sigma_is_small_sigma_even_at_the_end_of_a_word():
    # Python's Final_Sigma rule would give "οδυσσευς"; Go has no context rule.
    assert "ΟΔΥΣΣΕΥΣ".lower() == "οδυσσευς"
    assert terms("ΟΔΥΣΣΕΥΣ") == ["οδυσσευσ"]
    assert terms("ΣΣ Σ") == ["σσ", "σ"]


def test_final_sigma_already_in_the_text_is_kept():
    assert terms("ὁδός ΟΔΟΣ") == ["ὁδός", "οδοσ"]


def test_sharp_s_stays_sharp_s_and_capital_sharp_s_lowers_to_it():
    assert terms("Straße STRAẞE") == ["straße", "straße"]


def test_digits_of_other_scripts_are_numbers():
    # ARABIC-INDIC DIGIT THREE is Nd, SUPERSCRIPT TWO is No, ROMAN NUMERAL TWELVE is Nl.
    assert terms("x٣٤ y² Ⅻ") == ["x٣٤", "y²", "ⅻ"]


def test_combining_marks_break_a_term():
    # U+0301 is Mn, not a letter: a decomposed "é" splits the word; a precomposed one does not.
    assert terms("cafe\u0301 bar") == ["cafe", "bar"]
    assert terms("e\u0301te") == ["e", "te"]
    assert terms("café") == ["café"]
    # Devanagari vowel signs are Mc and the virama Mn: only the consonants remain.
    assert terms("हिन्दी") == ["ह", "न", "द"]


def test_underscore_joins_and_punctuation_splits():
    assert terms("snake_case_name, don't re-use __init__") == [
        "snake_case_name",
        "don",
        "t",
        "re",
        "use",
        "__init__",
    ]


def test_other_case_mappings_are_the_simple_ones():
    # Title-case DŽ, KELVIN SIGN, and a Cyrillic capital.
    assert terms("ǅungla \u212a Жук") == ["ǆungla", "k", "жук"]


def test_symbols_spaces_and_emoji_are_not_terms():
    assert terms("  — … 🙂 ① ") == ["①"]  # ① CIRCLED DIGIT ONE is No
    assert terms("") == []


@cache
def every_code_point() -> tuple[str, str, bytes, bytes]:
    """Every code point as one string, its per-rune reference lowercase, and class masks of both."""
    everything = "".join(map(chr, range(sys.maxunicode + 1)))
    lowered = "".join(map(reference_lower_rune, everything))
    category = unicodedata.category

    def mask(text: str) -> bytes:
        return bytes(ch == "_" or category(ch) in LETTERS_AND_NUMBERS for ch in text)

    return everything, lowered, mask(everything), mask(lowered)


def test_the_only_multi_rune_lowercase_is_dotted_capital_i():
    # If a newer Python's Unicode adds another, lexical.SIMPLE_LOWER_EXCEPTIONS needs its mapping.
    everything, _, _, _ = every_code_point()
    assert {ch for ch in everything if len(ch.lower()) != 1} == set(lexical.SIMPLE_LOWER_EXCEPTIONS)


def test_go_lower_matches_the_per_rune_mapping_over_every_code_point():
    everything, lowered, _, _ = every_code_point()
    assert go_lower(everything) == lowered


def test_lowercasing_never_moves_a_rune_into_or_out_of_the_term_class():
    # This is what makes "lowercase then match" equal to "match then lowercase".
    _, _, before, after = every_code_point()
    assert before == after


def test_term_pattern_covers_exactly_letters_numbers_and_underscore():
    everything, _, in_class, _ = every_code_point()
    # Removing every match leaves exactly the code points outside the class.
    outside = "".join(ch for ch, member in zip(everything, in_class, strict=True) if not member)
    assert lexical._tables()[0].sub("", everything) == outside


def test_known_tables_are_the_ones_this_python_computes():
    # lexical.KNOWN_TABLES spares a new process the pass over every code point; it must be that pass's.
    known, computed = lexical._tables(), lexical._computed_tables()
    assert (known[0].pattern, known[1]) == (computed[0].pattern, computed[1])


@settings(max_examples=200)
@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=60))
def test_terms_of_ascii_text_match_the_reference(text):
    assert terms(text) == reference_terms(text)


TRICKY = "aAzZ09_ -.,'\tİıIΣσςßẞ٣²Ⅻǅ\u212aé\u0301\u093f\u094dह🙂①\u00ad\u200d"


@settings(max_examples=200)
@given(st.text(alphabet=TRICKY, max_size=40) | st.text(max_size=40))
def test_terms_match_the_reference(text):
    assert terms(text) == reference_terms(text)


# --- BM25 ---------------------------------------------------------------------------------


def test_scores_on_a_hand_worked_example():
    documents = [["a", "b", "a"], ["b", "c"], ["d"]]
    index = BM25Index.from_terms(documents)
    # N = 3, avgdl = 6 / 3 = 2. For "a": df 1, idf = ln(1 + 2.5 / 1.5) = ln(8 / 3).
    # Document 0: tf 2, dl 3, K = 1.2 * (0.25 + 0.75 * 1.5) = 1.65,
    # weight = 2 * 2.2 / (2 + 1.65) = 4.4 / 3.65.
    expected_a0 = math.log(8 / 3) * 4.4 / 3.65
    # For "b": df 2, idf = ln(1 + 1.5 / 2.5) = ln(1.6). Document 1: tf 1, dl 2, K = 1.2,
    # weight = 2.2 / 2.2 = 1. Document 0: tf 1, K = 1.65, weight = 2.2 / 2.65.
    expected = [expected_a0 + math.log(1.6) * 2.2 / 2.65, math.log(1.6), 0.0]
    np.testing.assert_allclose(index.scores(["a", "b"]), expected, rtol=0, atol=1e-12)
    assert index.avgdl == 2.0
    assert index.vocabulary == ("a", "b", "c", "d")
    assert index.df.tolist() == [1, 2, 1, 1]


def test_repeated_query_terms_count_with_multiplicity():
    index = BM25Index.from_terms([["a", "b"], ["a"], ["c"]])
    np.testing.assert_allclose(index.scores(["a", "a"]), 2 * index.scores(["a"]), rtol=0, atol=1e-12)
    assert index.upper_bound(["a", "a"]) == pytest.approx(2 * index.upper_bound(["a"]))


def test_upper_bound_is_the_sum_of_idf_times_k1_plus_one_over_every_question_term():
    index = BM25Index.from_terms([["a", "b"], ["a"], ["c"]])
    # N = 3: "a" has df 2, idf ln(1 + 1.5/2.5); "b" df 1, idf ln(1 + 2.5/1.5); "zzz" is unknown,
    # so it weighs in at df 0: idf ln(1 + 3.5/0.5).
    unknown = math.log(1 + 3.5 / 0.5)
    expected = (math.log(1.6) + math.log(1 + 2.5 / 1.5) + unknown) * 2.2
    assert index.upper_bound(["a", "b", "zzz"]) == pytest.approx(expected, abs=1e-12)
    assert index.upper_bound(["zzz", "yyy"]) == pytest.approx(2 * unknown * 2.2, abs=1e-12)
    assert index.upper_bound([]) == 0.0
    assert not index.scores(["zzz"]).any()


def test_vocabulary_is_sorted_by_utf8_bytes_and_postings_by_document():
    index = BM25Index.from_texts(["zeta Ωmega alpha", "éclair alpha", "Zeta 中文 alpha alpha", ""])
    assert list(index.vocabulary) == sorted(index.vocabulary, key=lambda term: term.encode("utf-8"))
    for term_id in range(index.n_terms):
        docs = index.postings_doc[index.indptr[term_id] : index.indptr[term_id + 1]]
        assert (np.diff(docs) > 0).all()
    alpha = index.term_ids["alpha"]
    span = slice(index.indptr[alpha], index.indptr[alpha + 1])
    assert index.postings_doc[span].tolist() == [0, 1, 2]
    assert index.postings_tf[span].tolist() == [1, 1, 2]
    assert index.doc_len.tolist() == [3, 2, 4, 0]


def test_from_texts_uses_terms():
    texts = ["The İstanbul ΟΔΟΣ", "snake_case x٣"]
    by_text = BM25Index.from_texts(texts)
    by_terms = BM25Index.from_terms([terms(text) for text in texts])
    assert by_text.vocabulary == by_terms.vocabulary
    np.testing.assert_array_equal(by_text.postings_tf, by_terms.postings_tf)


def test_an_empty_collection_and_empty_documents_score_zero():
    empty = BM25Index.from_terms([])
    assert empty.n_docs == 0 and empty.scores(["a"]).shape == (0,) and empty.upper_bound([]) == 0.0
    blank = BM25Index.from_terms([[], []])
    assert blank.avgdl == 0.0 and blank.scores(["a"]).tolist() == [0.0, 0.0]


def test_k1_and_b_are_used():
    documents = [["a", "a", "b"], ["a"], ["c", "d", "e", "f"]]
    index = BM25Index.from_terms(documents, k1=2.0, b=0.3)
    np.testing.assert_allclose(
        index.scores(["a", "f"]), reference_scores(documents, ["a", "f"], k1=2.0, b=0.3), rtol=0, atol=1e-12
    )


VOCABULARY = ["a", "b", "c", "d", "e", "f", "g", "σ", "中"]
documents_strategy = st.lists(st.lists(st.sampled_from(VOCABULARY), max_size=30), min_size=1, max_size=40)
query_strategy = st.lists(st.sampled_from([*VOCABULARY, "unknown"]), max_size=8)


@settings(max_examples=150)
@given(documents_strategy, query_strategy)
def test_scores_match_the_reference(documents, query):
    index = BM25Index.from_terms(documents)
    if not any(documents):
        assert not index.scores(query).any()
        return
    np.testing.assert_allclose(index.scores(query), reference_scores(documents, query), rtol=0, atol=1e-9)


@settings(max_examples=150)
@given(documents_strategy, query_strategy)
def test_upper_bound_is_at_least_every_score(documents, query):
    index = BM25Index.from_terms(documents)
    scores = index.scores(query)
    bound = index.upper_bound(query)
    assert (scores <= bound).all()
    assert (scores >= 0).all()
    assert (bound == 0.0) == (not query)


@settings(max_examples=50)
@given(
    st.lists(st.text(alphabet=TRICKY, max_size=30), min_size=1, max_size=10),
    st.text(alphabet=TRICKY, max_size=15),
)
def test_scores_from_text_match_the_reference(texts, question):
    documents = [reference_terms(text) for text in texts]
    index = BM25Index.from_texts(texts)
    if not any(documents):
        return
    expected = reference_scores(documents, reference_terms(question))
    np.testing.assert_allclose(index.scores(terms(question)), expected, rtol=0, atol=1e-9)


def test_parts_scored_as_their_collection_use_its_idf_and_avgdl():
    records = [
        "the harbor lantern glows at night",
        "a short note",
        "lantern oil and wicks for the harbor shed",
    ]
    collection = BM25Index.from_texts(records)
    parts = ["the harbor lantern", "glows at night", "xylophone lantern"]
    scored = BM25Index.from_texts(parts).scored_as(collection)
    question = terms("harbor lantern xylophone")
    expected = []
    for part in parts:
        words = terms(part)
        total = 0.0
        for term in question:
            tf = words.count(term)
            if tf and term in collection.term_ids:  # "xylophone" is in no record: it weighs nothing
                norm = collection.k1 * (1 - collection.b + collection.b * len(words) / collection.avgdl)
                total += (
                    float(collection.idf[collection.term_ids[term]]) * tf * (collection.k1 + 1) / (tf + norm)
                )
        expected.append(total)
    assert np.allclose(scored.scores(question), expected, rtol=1e-12)
    # The collection's own scores do not move, and the upper bound is the collection's to use.
    assert np.array_equal(collection.scores(question), BM25Index.from_texts(records).scores(question))


def test_parts_of_an_empty_collection_score_nothing():
    scored = BM25Index.from_texts(["some words here"]).scored_as(BM25Index.from_texts(["", ""]))
    assert scored.scores(terms("some words")).tolist() == [0.0]
