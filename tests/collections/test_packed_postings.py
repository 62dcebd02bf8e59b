"""Packed postings (index.packed): every term's rows and frequencies read back exactly, whole or a few
rows at a time, whatever the gaps' widths, the blocks' cuts and the frequencies past a byte."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collections_app.index import packed
from collections_app.index.packed import FILES, PackedPostings, write_packed


def postings(seed: int, terms: int, rows: int, big_tf: float):
    """Random CSR postings: each term in a random number of distinct rows (some in none), ascending."""
    rng = np.random.default_rng(seed)
    lengths = rng.choice([0, 1, 2, 63, 64, 65, 128, 300], size=terms)
    lengths = np.minimum(lengths, rows)
    docs = [np.sort(rng.choice(rows, size=n, replace=False)) for n in lengths]
    tf = rng.integers(1, 5, int(lengths.sum()))
    tf[rng.random(tf.size) < big_tf] = rng.integers(255, 100_000)
    indptr = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    flat = np.concatenate(docs) if docs else np.zeros(0, np.int64)
    return indptr, flat.astype(np.int32), tf.astype(np.int32)


def read(directory, indptr, counts) -> PackedPostings:
    sizes = {
        "postings_gaps": counts["gap_bytes"],
        "term_at": indptr.size - 1,
        "term_width": indptr.size - 1,
        "block_first": counts["blocks"],
        "gap_escape_at": counts["gap_escapes"],
        "gap_escape": counts["gap_escapes"],
        "postings_tf": int(indptr[-1]),
        "tf_escape_at": counts["tf_escapes"],
        "tf_escape": counts["tf_escapes"],
    }
    arrays = {}
    for name, (filename, dtype) in FILES.items():
        array = np.fromfile(directory / filename, dtype=dtype)
        assert array.size == sizes[name], name
        arrays[name] = array
    return PackedPostings(arrays, indptr)


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 2**31),
    terms=st.integers(1, 40),
    rows=st.sampled_from([1, 3, 200, 70_000, 2**31 - 1]),
    big_tf=st.sampled_from([0.0, 0.05]),
    pass_size=st.sampled_from([1, 300, 1 << 22]),
    whole_share=st.sampled_from([4, 10**9]),
    decoded=st.sampled_from([(1 << 12, 1 << 22), (1, 1 << 22), (1, 400)]),
)
def test_every_posting_reads_back_whole_by_term_and_by_row(
    tmp_path_factory, monkeypatch_session, seed, terms, rows, big_tf, pass_size, whole_share, decoded
):
    monkeypatch_session.setattr(packed, "PACK_POSTINGS", pass_size)  # several packing passes, or one
    monkeypatch_session.setattr(packed, "WHOLE_SHARE", whole_share)  # rows found in their blocks, or not
    # `find`'s terms decoded and kept (every one, or some till the budget runs out), or none at this size.
    monkeypatch_session.setattr(packed, "DECODED_LEAST", decoded[0])
    monkeypatch_session.setattr(packed, "DECODED_POSTINGS", decoded[1])
    directory = tmp_path_factory.mktemp("p")
    indptr, docs, tf = postings(seed, terms, min(rows, 10**6) if rows < 2**31 - 1 else rows, big_tf)
    reader = read(directory, indptr, write_packed(directory, indptr, docs, tf))
    for term in range(terms):
        lo, hi = indptr[term], indptr[term + 1]
        got_docs, got_tf = reader.term(term)
        assert np.array_equal(got_docs, docs[lo:hi]) and np.array_equal(got_tf, tf[lo:hi])
    all_docs, all_tf = reader.all()
    assert np.array_equal(all_docs, docs) and np.array_equal(all_tf, tf)
    # A few rows: each term's frequency in each of them, 0 where it lacks them.
    asked = np.unique(np.concatenate([docs[:: max(1, docs.size // 7)], [0, int(docs.max(initial=0)) + 1]]))
    asked = asked[asked < 2**31 - 1]
    for term in range(terms):
        found, holds = reader.find(term, asked)
        lo, hi = indptr[term], indptr[term + 1]
        expected = {int(d): int(f) for d, f in zip(docs[lo:hi], tf[lo:hi], strict=True)}
        assert found.tolist() == [expected.get(int(r), 0) for r in asked]
        assert holds.tolist() == [int(r) in expected for r in asked]
    assert reader._decoded_postings <= decoded[1]
    # Asked again, kept terms answer from what they kept: the same.
    for term in range(terms):
        lo, hi = indptr[term], indptr[term + 1]
        expected = {int(d): int(f) for d, f in zip(docs[lo:hi], tf[lo:hi], strict=True)}
        assert reader.find(term, asked)[0].tolist() == [expected.get(int(r), 0) for r in asked]


@pytest.fixture(scope="session")
def monkeypatch_session():
    with pytest.MonkeyPatch.context() as patch:
        yield patch


def test_a_terms_gaps_take_the_width_that_costs_least_and_frequencies_one_byte(tmp_path):
    """A term in every row: gaps of 1, one byte each. A term with one gap of 300 among small ones: one byte
    each and that gap escaped. A term of gaps all past 65,535: four bytes each, no escape."""
    dense, sparse = np.arange(300), np.concatenate([np.arange(100), [400], np.arange(401, 500)])
    wide = np.arange(0, 70_000 * 200, 70_000)
    docs = np.concatenate([dense, sparse, wide]).astype(np.int32)
    indptr = np.cumsum([0, dense.size, sparse.size, wide.size]).astype(np.int64)
    counts = write_packed(tmp_path, indptr, docs, np.ones(docs.size, dtype=np.int32))
    assert np.fromfile(tmp_path / "term_width.u8", dtype=np.uint8).tolist() == [1, 1, 4]
    assert counts["gap_escapes"] == 1 and counts["tf_escapes"] == 0
    assert counts["gap_bytes"] == 300 + 200 + 4 * 200
    assert (tmp_path / "postings_tf.u8").stat().st_size == docs.size
    reader = read(tmp_path, indptr, counts)
    assert np.array_equal(np.concatenate([reader.term(t)[0] for t in range(3)]), docs)
