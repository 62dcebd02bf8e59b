"""The per-build index files: written whole, mapped read-only, scored exactly as seed 004's BM25 and
the exact cosine — for all rows or for any subset's statistics."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collections_app.index.format import IndexUnusable
from collections_app.index.ivf import build_lists
from collections_app.index.mapped import MappedIndex
from collections_app.index.vector_codec import half_products, half_query
from collections_app.index.writer import IndexWriter
from collections_app.services.indexes import remove_stale
from collections_app.text.windows import LATER_WINDOW_SHARE
from ragsite.lexical import BM25Index, terms
from ragsite.top import top_rows

TEXTS = [
    "Carry-over of annual leave is capped at five days a year.",
    "Unused days expire at the end of April.",
    "Laptops must use full-disk encryption; ÄRGER über Straße.",
    "Mileage is reimbursed at 0.42 per kilometre. Trains, trains, trains.",
    "",
    "Leave requests go to your line manager; annual leave annual leave.",
]


def write(tmp_path, texts, vectors=None, block=2, dimensions=4, key="b1"):
    writer = IndexWriter(dimensions)
    vectors = vectors if vectors is not None else [None] * len(texts)
    for start in range(0, len(texts), block):
        part = range(start, min(start + block, len(texts)))
        writer.add(
            [100 + i for i in part],
            [i // 2 for i in part],
            [terms(texts[i]) for i in part],
            [vectors[i] for i in part],
        )
    return MappedIndex(writer.write(tmp_path, key))


@pytest.mark.parametrize("block", [1, 2, 4, 100])
def test_scores_equal_the_seed_bm25_whatever_the_blocks_it_was_written_in(tmp_path, block):
    index = write(tmp_path, TEXTS, block=block)
    reference = BM25Index.from_texts(TEXTS)
    for question in [
        "annual leave",
        "trains per kilometre",
        "straße ärger",
        "nothing here",
        "leave leave days",
    ]:
        scores, upper = index.bm25(terms(question))
        assert np.array_equal(scores, reference.scores(terms(question)))
        assert upper == reference.upper_bound(terms(question))
    assert list(index.row_paragraph) == [100 + i for i in range(len(TEXTS))]
    assert [index.term_id(t) for t in reference.vocabulary] == list(range(reference.n_terms))
    assert index.term_id("absent") is None


def test_the_all_rows_views_kept_norms_and_a_views_own_weights_are_the_seeds_bits(tmp_path):
    """The all-rows view keeps each row's length term (`bm25_norms`) and computes a posting's weight from
    it and tf; a view of every row computes the whole weight per posting. Both are seed 004's BM25 to
    the bit, over postings cut into several blocks (a term in more rows than a block holds)."""
    texts = [*TEXTS, *(f"annual leave day {i} " * (1 + i % 3) for i in range(300))]
    index = write(tmp_path, texts, block=50)
    assert index.packed.block_first.size > index.n_terms  # some term's postings span several blocks
    reference = BM25Index.from_texts(texts)
    every = index.view(np.ones(len(texts), dtype=bool))
    for question in ["annual leave", "trains trains per kilometre", "straße ärger days 17"]:
        assert np.array_equal(index.bm25(terms(question))[0], reference.scores(terms(question)))
        assert np.array_equal(index.bm25(terms(question), every)[0], reference.scores(terms(question)))


@settings(max_examples=40, deadline=None)
@given(
    mask=st.lists(st.booleans(), min_size=len(TEXTS), max_size=len(TEXTS)).filter(any),
    question=st.sampled_from(["annual leave days", "trains encryption", "april manager leave"]),
)
def test_a_views_statistics_are_those_of_its_rows_alone(tmp_path_factory, mask, question):
    """BM25 over a subset's view equals BM25 of an index built from that subset only."""
    index = write(tmp_path_factory.mktemp("v"), TEXTS)
    mask = np.asarray(mask)
    scores, upper = index.bm25(terms(question), index.view(mask))
    alone = BM25Index.from_texts([t for t, keep in zip(TEXTS, mask, strict=True) if keep])
    assert np.allclose(scores[mask], alone.scores(terms(question)), rtol=0, atol=1e-12)
    assert upper == pytest.approx(alone.upper_bound(terms(question)), abs=1e-12)


def test_a_paragraph_scores_its_first_window_and_a_share_of_a_better_later_one_and_no_vector_none(tmp_path):
    e = np.eye(4, dtype=np.float32)
    vectors = [e[0], np.stack([e[1], e[2]]), None, e[3], np.stack([e[0], e[3], e[1]]), None]
    index = write(tmp_path, TEXTS, vectors=vectors)
    assert index.vectors.dtype == np.float32 and index.vectors.shape == (7, 4)  # no lists: float32
    query = np.asarray([0.1, 0.2, 0.9, 0.3], dtype=np.float32)
    cosine = index.cosine(query)
    share = LATER_WINDOW_SHARE
    assert cosine[0] == pytest.approx(0.1) and cosine[3] == pytest.approx(0.3)
    assert cosine[1] == pytest.approx(0.2 + share * (0.9 - 0.2))  # first 0.2, best later 0.9
    assert cosine[4] == pytest.approx(0.1 + share * (0.3 - 0.1))  # first 0.1, best later 0.3 (then 0.2)
    assert np.isneginf(cosine[2]) and np.isneginf(cosine[5])
    # The candidates' path (IVF, the playground's explain) pools the same way, row order as asked.
    rows = np.asarray([4, 2, 1, 0])
    assert np.array_equal(index.cosine_of_rows(query, rows), cosine[rows])


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.sampled_from([0.0, 0.1, 0.5, 0.5, 0.9, 1.0]), min_size=0, max_size=40),
    k=st.integers(1, 12),
    eligible_seed=st.integers(0, 2**31),
)
def test_top_rows_is_a_stable_full_sort_cut_at_k(values, k, eligible_seed):
    scores = np.asarray(values, dtype=np.float64)
    eligible = np.random.default_rng(eligible_seed).random(scores.size) < 0.7
    rows = np.flatnonzero(eligible)
    expected = rows[np.argsort(-scores[rows], kind="stable")[:k]]
    assert np.array_equal(top_rows(scores, eligible, k), expected)


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(200, 5000),
    k=st.integers(1, 12),
    levels=st.sampled_from([0, 3, 50]),
    zeros=st.floats(0, 1),
    seed=st.integers(0, 2**31),
)
def test_top_rows_over_many_rows_takes_the_sampled_threshold_and_stays_exact(size, k, levels, zeros, seed):
    """Long score arrays go through a strided sample first; ties and mostly-zero arrays included."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, levels, size) / 7.0 if levels else rng.random(size)
    scores[rng.random(size) < zeros] = 0.0
    for eligible in (None, rng.random(size) < 0.5):
        rows = np.arange(size) if eligible is None else np.flatnonzero(eligible)
        expected = rows[np.argsort(-scores[rows], kind="stable")[:k]]
        assert np.array_equal(top_rows(scores, eligible, k), expected)


def test_a_torn_or_foreign_index_is_refused_not_read(tmp_path):
    path = write(tmp_path, TEXTS).path
    (path / "postings_tf.u8").write_bytes(b"\0" * 3)
    with pytest.raises(IndexUnusable, match="postings_tf"):
        MappedIndex(path)
    path = write(tmp_path, TEXTS, key="b2").path
    meta = json.loads((path / "meta.json").read_text())
    (path / "meta.json").write_text(json.dumps({**meta, "format": 99}))
    with pytest.raises(IndexUnusable, match="format"):
        MappedIndex(path)
    with pytest.raises(IndexUnusable, match="meta.json"):
        MappedIndex(tmp_path / "never-written")


def test_a_part_deleted_under_a_load_makes_the_index_unusable_not_a_different_index(tmp_path):
    # A search process mapping an index while another removes it must not read it without its
    # context (other scores, no error): the parts written are listed, and a missing one refuses.
    context = IndexWriter(4)
    context.add(
        [100 + i for i in range(len(TEXTS))],
        [0] * len(TEXTS),
        [terms("Handbook › Leave")] * len(TEXTS),
        [None] * len(TEXTS),
    )
    writer = IndexWriter(4)
    writer.add(
        [100 + i for i in range(len(TEXTS))], [0] * len(TEXTS), [terms(t) for t in TEXTS], [None] * len(TEXTS)
    )
    path = writer.write(tmp_path, "b1", parts={"context": context})
    assert MappedIndex(path).context is not None
    import shutil

    shutil.rmtree(path / "context")
    with pytest.raises(IndexUnusable, match="meta.json"):
        MappedIndex(path)


def test_the_index_is_renamed_into_place_whole_and_older_builds_are_removed(tmp_path):
    write(tmp_path, TEXTS, key="old")
    write(tmp_path, TEXTS, key="new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["new", "old"]  # no temporary left behind
    remove_stale(tmp_path, keep="new")
    assert [p.name for p in tmp_path.iterdir()] == ["new"]
    # A second writer of the same build keeps the first one's files.
    again = write(tmp_path, TEXTS, key="new")
    assert again.size == len(TEXTS) and [p.name for p in tmp_path.iterdir()] == ["new"]


def test_the_postings_are_seed_004s_bm25_index_exactly(tmp_path):
    """What the interchange export writes bm25.idx from, without tokenising the texts again."""
    reference = BM25Index.from_texts(TEXTS)
    rebuilt = write(tmp_path, TEXTS, block=3).bm25_index()
    assert rebuilt.vocabulary == reference.vocabulary
    for name in ("doc_len", "indptr", "postings_doc", "postings_tf", "df", "idf", "_weights"):
        assert np.array_equal(getattr(rebuilt, name), getattr(reference, name)), name
    assert rebuilt.avgdl == reference.avgdl


@pytest.mark.parametrize("lists", [False, True])
def test_vectors_scored_in_blocks_equal_one_product_over_all_of_them(tmp_path, monkeypatch, lists):
    """Some windows' products (an IVF probe's, a search's exact candidates') are gathered a block at a
    time (a web worker's memory, docs/decisions/0031); each is the one a single gather of them all gives,
    to the bit, in the order asked, and the rows' pooled cosines are unchanged."""
    from collections_app.index import mapped as mapped_index

    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((1000, 48)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    writer = IndexWriter(48)
    writer.add(
        list(range(1000)), [i // 10 for i in range(1000)], [terms("w")] * 1000, [v[None, :] for v in vectors]
    )
    ivf = build_lists(writer.matrix(), index_id="blocks") if lists else None
    index = MappedIndex(writer.write(tmp_path, "b1", ivf=ivf))
    assert (index.vector_at is not None) == lists  # with lists, the one copy is in their order
    members = np.sort(rng.choice(1000, size=777, replace=False))
    question = vectors[3]
    # With lists the one copy is float16 (as the store keeps them); without, float32 in vector order.
    kept = vectors.astype(np.float16).astype(np.float32) if lists else vectors
    assert index.vectors.dtype == (np.float16 if lists else np.float32)
    # One product over them all: numpy's over float32, NumKong's over the float16 copy (vector_codec).
    whole = kept[members] @ question
    if lists:
        whole_half = half_products(kept[members].astype(np.float16), half_query(question))
        assert np.allclose(whole_half, whole, atol=1e-6)
        whole = whole_half
    assert np.array_equal(index.vector_matrix(), kept)
    assert np.allclose(index.cosine(question), kept @ question, atol=1e-6)  # the scan, in either order
    rows = index.cosine_of_rows(question, members)
    monkeypatch.setattr(mapped_index, "GATHER_BLOCK", 64)  # 13 blocks, the last one short
    assert np.array_equal(index.products(members, question), whole)
    assert index.products(members[:0], question).shape == (0,)
    assert np.array_equal(index.cosine_of_rows(question, members), rows)
