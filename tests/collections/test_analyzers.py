"""A collection's analyzer, as a pure module: what terms each one makes of a text, and the postings a
build derives from seed 004's (`postings.analyzed`), which must be those of the analyzer's own terms."""

import pytest
import Stemmer
from hypothesis import given, settings
from hypothesis import strategies as st

from collections_app.index.byte_terms import text_postings
from collections_app.index.postings import BlockPostings, analyzed, block_postings
from collections_app.measure import Variant, VectorCache, scratch_index
from collections_app.measure import rank as measure_rank
from ragsite.analyzers import ANALYZERS, NAME_MAX_LENGTH, SNOWBALL_LANGUAGES, UnknownAnalyzer, analyzer
from ragsite.lexical import BM25Index
from ragsite.lexical import terms as seed_terms


def test_every_offered_language_is_a_stemmer_the_installed_package_has():
    assert set(SNOWBALL_LANGUAGES) <= set(Stemmer.algorithms())
    assert max(map(len, ANALYZERS)) <= NAME_MAX_LENGTH
    assert ANALYZERS[:2] == ("simple", "cjk") and "english" in ANALYZERS


def test_an_unknown_name_is_refused_naming_the_choices():
    with pytest.raises(UnknownAnalyzer, match="simple, cjk, arabic"):
        analyzer("klingon")


def test_simple_is_seed_004s_terms_exactly():
    text = "Policies, POLICY and İstanbul's Σοφία — 東京都の会社"
    assert analyzer("simple").terms(text) == seed_terms(text)


def test_english_gives_policies_and_policy_one_term_and_simple_two():
    english, simple = analyzer("english"), analyzer("simple")
    assert english.terms("Policies") == english.terms("policy") == ["polici"]
    assert simple.terms("Policies") != simple.terms("policy")
    assert english.terms("The runners were running") == ["the", "runner", "were", "run"]


def test_english_exact_gives_each_term_as_it_is_and_its_marked_stem():
    exact = analyzer("english_exact")
    assert exact.terms("Policies vacuum") == ["policies", "~polici", "vacuum", "~vacuum"]
    # The stems meet as english's do; the exact forms stay apart, and never meet a stem.
    assert set(exact.terms("policy")) & set(exact.terms("policies")) == {"~polici"}
    (german_stem,) = analyzer("german").terms("Häusern")
    assert analyzer("german_exact").terms("Häusern") == ["häusern", "~" + german_stem]


def test_english_exact_ranks_the_exact_form_above_a_stem_only_match():
    # Under english the two paragraphs are the same terms; only the first holds the question's own
    # word, which english cannot tell apart and english_exact counts on top.
    paragraphs = ["Autovacuum starts vacuuming on a table.", "Autovacuum starts vacuum of a table."]
    question = "vacuuming a table"
    for name, first_wins in [("english_exact", True), ("english", False)]:
        under = analyzer(name)
        scores = BM25Index.from_terms(under.terms(p) for p in paragraphs).scores(under.terms(question))
        assert bool(scores[0] > scores[1]) is first_wins, (name, scores)


def test_another_snowball_language_stems_its_own_words():
    assert analyzer("french").terms("politiques") == analyzer("french").terms("politique")
    assert analyzer("german").terms("Häuser") == analyzer("german").terms("Häusern")


def test_cjk_reads_a_run_as_overlapping_pairs_and_the_rest_as_simple():
    cjk = analyzer("cjk")
    assert seed_terms("会社は九時に始まります。") == [
        "会社は九時に始まります"
    ]  # one term: no question meets it
    assert cjk.terms("会社は九時に始まります。") == [
        *["会社", "社は", "は九", "九時", "時に", "に始", "始ま", "まり", "りま", "ます"]
    ]
    # A lone character stays itself; Latin text and digits beside a run keep the seed's terms.
    assert cjk.terms("Tokyo東京 office 3階 水") == ["tokyo", "東京", "office", "3", "階", "水"]
    assert cjk.terms("한국어 문서") == ["한국", "국어", "문서"]
    assert cjk.terms("Policies") == ["policies"]  # no stemming


# Texts made of pieces: words that stem, CJK runs, marks and separators, in any order.
PIECES = [*"ab cdé_1.,\n", "policies", "Policy", "東京", "都の", "会", "한국어", "Σ"]
TEXTS = st.lists(st.lists(st.sampled_from(PIECES), max_size=20).map("".join), min_size=1, max_size=6)


def _as_set(postings: BlockPostings):
    triples = sorted(
        (postings.vocabulary[t], int(d), int(f))
        for t, d, f in zip(postings.term, postings.doc, postings.tf, strict=True)
    )
    return triples, postings.lengths.tolist()


@settings(max_examples=60, deadline=None)
@given(texts=TEXTS, name=st.sampled_from(["simple", "english", "cjk", "french", "english_exact"]))
def test_a_builds_postings_are_those_of_the_analyzers_terms(texts, name):
    under = analyzer(name)
    derived = analyzed(BlockPostings(*text_postings(texts)), under)
    assert _as_set(derived) == _as_set(block_postings([under.terms(text) for text in texts]))
    # Sorted by (term, row), as the index writer requires of a block.
    keys = derived.term * max(len(texts), 1) + derived.doc
    assert (keys[1:] > keys[:-1]).all()


def test_bm25_over_english_terms_finds_the_singular_for_the_plural():
    paragraphs = ["The travel policy covers flights.", "Lunch is served at noon."]
    for name, found in [("english", True), ("simple", False)]:
        under = analyzer(name)
        index = BM25Index.from_terms(under.terms(p) for p in paragraphs)
        assert index.scores(under.terms("travel policies")).argmax() == 0
        assert bool(index.scores(under.terms("policies"))[0] > 0) is found


def test_measure_ranks_in_the_collections_analyzer():
    documents = ["# Travel\n\nThe travel policy covers flights.\n", "# Food\n\nLunch is served at noon.\n"]
    variant = Variant(method="structure", size=None, overlap=0, around=0)
    for name, found in [("english", True), ("simple", False)]:
        index = scratch_index(
            documents, variant, cache=VectorCache(None), analyzer=name, names=["t.md", "f.md"]
        )
        runs = measure_rank(index, "policies", None, weight=0.5, most=5, around=0, floor=0.01)
        assert bool(runs and "travel policy" in runs[0].text) is found
