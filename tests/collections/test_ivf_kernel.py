"""The IVF kernel behind the mapped index: each list read as one contiguous block of the index's one
copy of the vectors (float16, in list order), the rows a search may not use filtered inside the kernel (a
masked-out row never takes a candidate's place), and the same probed rows and products as gathering
them from the index's vectors."""

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from collections_app.index.ivf import build_lists
from collections_app.index.mapped import MappedIndex
from collections_app.index.vector_codec import half_query
from collections_app.index.writer import IndexWriter
from collections_app.ranking import top_at_floor
from collections_app.services.search import approximate
from ragsite.fusion import entry_score

ROWS, DIMENSIONS = 3000, 16


def clustered(rows: int = ROWS, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, DIMENSIONS))
    vectors = centres[rng.integers(0, 40, rows)] + 0.3 * rng.standard_normal((rows, DIMENSIONS))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """An index of ROWS one-window rows with its IVF lists, written and mapped as a build's is."""
    vectors = clustered()
    writer = IndexWriter(DIMENSIONS)
    writer.add(list(range(1, ROWS + 1)), [1 + i // 10 for i in range(ROWS)], [["word"]] * ROWS, list(vectors))
    lists = build_lists(vectors, index_id="kernel")
    path = writer.write(tmp_path_factory.mktemp("index"), "k", ivf=lists)
    return MappedIndex(path), lists, vectors


def gathered(index: MappedIndex):
    return index.products


def test_the_index_holds_the_vectors_once_in_list_order_as_float16_and_maps_them(written):
    index, lists, vectors = written
    files = sorted(p.name for p in index.path.glob("vector*"))
    assert files == ["vector_at.i32", "vector_row.i32", "vectors.f16"]
    assert (index.path / "vectors.f16").stat().st_size == ROWS * DIMENSIONS * 2
    assert np.shares_memory(index.ivf.ordered, index.vectors) and lists.ordered is None  # one copy
    members = np.asarray(lists.members)
    assert np.array_equal(index.ivf.ordered, vectors[members].astype(np.float16))
    # Each vector's place in the list order, which exact rescoring reads through.
    assert np.array_equal(index.vector_at[members], np.arange(ROWS))


@pytest.mark.parametrize("nprobe", [1, 3, 10_000])
def test_a_scan_of_the_ordered_lists_reads_the_rows_and_products_a_gather_reads(written, nprobe):
    index, lists, vectors = written
    for question in clustered(5, seed=1):
        ids, products = index.ivf.scan(question, nprobe, index.products)
        old_ids, old_products = lists.scan(question, nprobe, gathered(index))  # no ordered copy: gathered
        assert np.array_equal(ids, old_ids)
        assert np.allclose(products, old_products, atol=1e-6)
        assert np.array_equal(np.sort(ids), lists.probe(question, nprobe))
        assert np.allclose(products, vectors[ids] @ question, atol=2e-3)  # float16 values


@pytest.mark.parametrize("share", [0.01, 0.1, 1.0])
def test_a_reader_of_few_rows_still_gets_every_candidate_from_the_rows_it_may_read(written, share):
    """A reader who may read 1 % of the rows: the vector candidates are the best K readable rows of the
    probed lists (every list probed: the exact readable top K), never fewer because unreadable rows
    came first, and never an unreadable one."""
    index, _lists, vectors = written
    mask = np.random.default_rng(7).random(ROWS) < share
    depth = approximate.CANDIDATE_DEPTH
    for question in clustered(5, seed=2):
        found, probe = approximate.candidates("k", index.ivf, index, question, None, mask, 10_000)
        assert mask[found].all()
        readable = np.flatnonzero(mask)
        best = readable[np.argsort(-(vectors[readable] @ question), kind="stable")[:depth]]
        assert set(found.tolist()) == set(best.tolist())
        assert found.size == min(depth, readable.size)
        assert mask[np.asarray(index.vector_row)[probe.members]].all()
        # At the measured nprobe: as many readable rows as the probed lists hold, up to K.
        found, probe = approximate.candidates("k", index.ivf, index, question, None, mask, None)
        probed = index.ivf.probe(question)
        assert mask[found].all()
        assert found.size == min(depth, int(mask[probed].sum()))


def test_an_index_written_before_the_ordered_copy_still_searches_by_gathering(written):
    index, lists, _vectors = written
    older = replace(index.ivf, ordered=None)
    mask = np.ones(ROWS, dtype=bool)
    for question in clustered(3, seed=3):
        new, _ = approximate.candidates("k", index.ivf, index, question, None, mask, 4)
        old, _ = approximate.candidates("k", older, index, question, None, mask, 4)
        assert np.array_equal(new, old)


@pytest.mark.parametrize("share", [0.01, 0.5])
def test_rows_tied_with_the_kth_lexical_candidate_are_candidates_wherever_their_lists_are(
    written, monkeypatch, share
):
    """Issue 29 item 4: every row holds the same one term, so every row ties on BM25. A fixed depth
    took K of them, by position; now every readable tied row is scored exactly (at most EXTENSION_CAP x K,
    the best first), whichever lists the probe read."""
    index, _lists, _vectors = written
    monkeypatch.setattr(approximate, "CANDIDATE_DEPTH", 10)
    monkeypatch.setattr(approximate, "EXTENSION_CAP", 1000)  # room for every row
    bm25, _bound = index.bm25(["word"])
    assert np.all(bm25 == bm25[0]) and bm25[0] > 0
    mask = np.random.default_rng(11).random(ROWS) < share
    question = clustered(1, seed=4)[0]
    found, probe = approximate.candidates("k", index.ivf, index, question, bm25, mask, 1)
    assert mask[found].all()
    assert set(found.tolist()) == set(np.flatnonzero(mask).tolist())
    assert probe.lexical_out == bm25[0]
    monkeypatch.setattr(approximate, "EXTENSION_CAP", 2)  # twenty tied rows at most, beside the probe's
    found, _probe = approximate.candidates("k", index.ivf, index, question, bm25, mask, 1)
    probed = set(index.ivf.probe(question, 1).tolist()) & set(np.flatnonzero(mask).tolist())
    assert len(set(found.tolist()) - probed) <= 20


def test_candidates_scored_from_the_probes_products_get_the_bits_a_gather_gives(written):
    """A search prepares its question once and scores its vector candidates with the products the probe
    took (`Probe.near`), partly or wholly: each row's cosine is the bits reading its vector again gives."""
    index, _lists, _vectors = written
    mask = np.ones(ROWS, dtype=bool)
    for question in clustered(3, seed=5):
        prepared = half_query(question)
        found, probe = approximate.candidates("k", index.ivf, index, prepared, None, mask, 4)
        assert probe.near is not None and np.array_equal(probe.near[0], found)
        again = index.row_cosines(question, found).view(np.uint32)
        assert np.array_equal(index.row_cosines(prepared, found, None, probe.near).view(np.uint32), again)
        some = probe.near[0][::3], probe.near[1][::3]
        assert np.array_equal(index.row_cosines(prepared, found, None, some).view(np.uint32), again)
        others = np.setdiff1d(np.arange(ROWS), found)[:50]  # none known: all read
        assert np.array_equal(
            index.row_cosines(prepared, others, None, probe.near), index.row_cosines(question, others)
        )


@given(
    st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.5, 0.75, 1.0]), min_size=0, max_size=40),
    st.sampled_from([0.0, 0.3, 0.5, 0.9]),
    st.integers(1, 12),
)
def test_the_candidates_top_and_entry_score_are_the_floor_rules_own(values, floor, most):
    """The top the approximate path answers with and the score a row left out must reach come from one
    pass over the scored candidates: the same rows as `top_at_floor` and the same score as
    `fusion.entry_score`, ties and floors included."""
    scores = np.asarray(values, dtype=np.float64)
    rows = np.arange(scores.size, dtype=np.int64) * 3 + 1  # readable, ascending, not their positions
    top, threshold = approximate._top_and_entry(rows, scores, floor, most)
    assert top.tolist() == top_at_floor(scores, floor, most, rows=rows).tolist()
    assert threshold == entry_score(scores, floor, most)
