"""A block's postings found on its texts' bytes (index.byte_terms, issue 29 item 5) are the postings of
the texts' terms (`lexical.terms` then `postings.block_postings`), whatever the texts: ASCII or not,
empty, long words, digits, underscores, upper case, NUL; and an index written with them is the one
written from the terms, byte for byte."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collections_app.index.byte_terms import text_postings
from collections_app.index.postings import BlockPostings, block_postings, row_postings, row_postings_of_terms
from collections_app.services import indexes
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.text.stitch import carried_terms_text
from ragsite.lexical import terms
from tests.conftest import HANDBOOK

# Term characters and not, ASCII and not: a combining accent (not a letter: it splits a word), Σ and
# final ς, dotted İ (Go lowers it to one rune), the Kelvin sign (lowers to ASCII "k"), a ligature,
# superscript two (a number), a non-breaking space and an en dash (separators), CJK, an emoji.
ALPHABET = "aAzZ09_ \n\t.,-'\x00é\u0301ΣςİK\u212aﬁ²µß\u00a0–漢😀"
WORDS = st.text(alphabet=ALPHABET, max_size=12) | st.text(alphabet="abcXYZ_019", min_size=7, max_size=40)
TEXTS = st.lists(WORDS, max_size=12).map(" ".join) | st.text(alphabet=ALPHABET, max_size=60)


def triples(postings) -> list[tuple[str, int, int]]:
    vocabulary, term, doc, tf = postings[:4]
    return sorted((vocabulary[t], int(d), int(f)) for t, d, f in zip(term, doc, tf, strict=True))


def assert_same_postings(texts: list[str]) -> None:
    found = BlockPostings(*text_postings(texts))
    expected = block_postings([terms(text) for text in texts])
    assert triples(found) == triples(expected)
    assert found.lengths.tolist() == expected.lengths.tolist()
    assert sorted(found.vocabulary) == sorted(expected.vocabulary)  # each term once, none unused
    # Sorted by (term, row), as the writer needs (its stable sort by term keeps each term's rows ascending).
    order = found.term * max(len(texts), 1) + found.doc
    assert np.all(np.diff(order) > 0)
    assert found.term.dtype == np.int64 and found.doc.dtype == np.int32 and found.tf.dtype == np.int32


@settings(max_examples=300, deadline=None)
@given(st.lists(TEXTS, max_size=8))
def test_the_postings_of_any_texts_are_those_of_their_terms(texts):
    assert_same_postings(texts)


@pytest.mark.parametrize(
    "texts",
    [
        [],
        [""],
        ["", "", ""],
        [" ,.\n", "\x00\x00", "–\u00a0\u0301"],
        ["Hello WORLD hello", "hello_world HELLO_WORLD 42 042 0"],
        ["a" * 8, "a" * 9, "a" * 16, "a" * 17, "a" * 300 + " " + "A" * 300],
        ["abcdefgh abcdefghi abcdefghijklmnop abcdefghijklmnopq abcdefgh"],
        ["x\x00y", "_", "__init__", "9" * 20],
        ["Ünïcode ÉTÉ déjà_vu \u212aelvin İstanbul ΣΑΣ ΟΔΟΣ", "plain ascii after it", "µm ²3 ﬁne"],
        ["e\u0301t\u0301e\u0301", "漢字 テスト", "😀smile😀", "mixed é and e"],
        ["a\ud800b", "lone \udfff surrogates cannot be UTF-8"],  # blanked before the buffer is encoded
    ],
)
def test_edge_cases(texts):
    assert_same_postings(texts)


def test_more_rows_than_fit_beside_a_packed_term_are_still_counted():
    """Past 2**15 rows the row number no longer fits beside 48 bits of term: every run is decoded."""
    texts = [f"w{i % 7} Shared" for i in range((1 << 15) + 3)]
    assert_same_postings(texts)


def test_row_postings_are_the_three_fields_terms():
    texts = ["Carry-over of leave. Über alles", "second ROW_2", ""]
    contexts = ["Leave › Policy", None, "Ünïcode"]
    carried = [7, 0, 3]  # "Carry-o": a cut inside a word takes the word whole
    text, context, opening = row_postings(texts, contexts, carried)
    assert triples(text) == triples(block_postings([terms(t) for t in texts]))
    assert triples(context) == triples(block_postings([terms(c or "") for c in contexts]))
    openings = [terms(carried_terms_text(t, n)) for t, n in zip(texts, carried, strict=True)]
    assert triples(opening) == triples(block_postings(openings))
    assert triples(opening) == [("carry", 0, 1), ("over", 0, 1)]


def files_of(path):
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


@pytest.mark.django_db
def test_an_index_written_from_bytes_is_the_one_written_from_terms(
    agent, knowledge_folder, settings, monkeypatch
):
    # Overlapping pieces (carried openings), non-ASCII words, headings (contexts), several blocks.
    collection = create_collection(agent=agent, name="shelf", method="structure", size=80, overlap=40)
    notes = {
        f"n{i}.md": f"# Nöte {i}\n\nNote {i} on cobalt_{i % 3} and Σίσυφος, ÉTÉ {i * 7}; naïve café. "
        f"Second sentence of note {i}, which is long enough to overlap the next piece.\n"
        for i in range(12)
    }
    knowledge_folder("shelf", {**HANDBOOK, **notes})
    # The notes differ only in their numbers: their paragraphs wait in review, the build is live.
    assert build_collection(collection=collection).status == "succeeded_with_review"
    monkeypatch.setattr(indexes, "ROWS_PER_BLOCK", 5)
    settings.INDEX_WRITE_PROCESSES = 1
    written = {}
    for name, cut in (("bytes", row_postings), ("terms", row_postings_of_terms)):
        monkeypatch.setattr(indexes, "row_postings", cut)
        for entry in indexes.collection_root(collection.pk).iterdir():
            if entry.is_dir():
                indexes.shutil.rmtree(entry)
        _key, path = indexes.write_index(collection=collection)
        written[name] = files_of(path)
    assert "carried/vocab.bin" in written["terms"]  # the overlap gave rows carried openings
    assert any(not term.isascii() for term in written["terms"]["vocab.bin"].decode("utf-8").split("\0"))
    assert written["bytes"] == written["terms"]
