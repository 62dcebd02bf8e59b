"""The float16 vector kernel (`vector_codec.half_products`, NumKong's packed float16 product with the
question split in two float16 parts): each product within a stated bound of the exact one, a row's
product the same bits whichever block it is computed in, and so the approximate (IVF) path and the exact
path giving each row the same score and the same top k."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from collections_app.index.ivf import build_lists
from collections_app.index.mapped import MappedIndex
from collections_app.index.vector_codec import half_products, half_query
from collections_app.index.writer import IndexWriter
from ragsite.top import top_rows

UNIT = 2.0**-24  # float32's unit roundoff


def bound(block: np.ndarray, query: np.ndarray) -> np.ndarray:
    """How far each product may be from the exact one, whatever order the kernel sums in:
    (1.001 γ_d + 2**-21) Σ|x_i q_i| + 2**-36 max|q| Σ|x_i| + 2**-150.

    γ_d = d u / (1 - d u) is float32's bound for a sum of d products (numpy's own float32 product is
    within γ_d Σ|x_i q_i|); splitting the question into float16 parts leaves at most 2**-22 of each
    component out (the second term covers parts that fall among float16's subnormals), and the sum of
    the two parts' products is rounded to float32 once more: below float32's smallest subnormal (2**-149)
    that rounding is absolute, half of it at most (a question of 1e-45 gives -0.0 for -4.9e-47)."""
    x = block.astype(np.float64)
    q = query.astype(np.float64)
    d = block.shape[1]
    gamma = d * UNIT / (1 - d * UNIT)
    largest = float(np.max(np.abs(q))) if q.size else 0.0
    relative = (1.001 * gamma + 2.0**-21) * (np.abs(x) @ np.abs(q))
    return relative + 2.0**-36 * largest * np.abs(x).sum(axis=1) + 2.0**-150


finite_halves = (
    st.integers(0, 2**16 - 1).map(lambda bits: np.uint16(bits).view(np.float16)).filter(np.isfinite)
)


@st.composite
def blocks_and_questions(draw):
    d = draw(st.integers(1, 420))
    rows = draw(st.integers(1, 40))
    kind = draw(st.sampled_from(["unit", "any bits"]))
    if kind == "unit":  # what embedders give: unit rows, float16 as the store keeps them
        seed = draw(st.integers(0, 2**32 - 1))
        rng = np.random.default_rng(seed)
        block = rng.standard_normal((rows, d))
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        block = block.astype(np.float16)
    else:  # any finite float16: zeros, subnormals, the largest values
        block = draw(hnp.arrays(np.float16, (rows, d), elements=finite_halves))
    scale = 2.0 ** draw(st.integers(-30, 30))
    query = draw(
        hnp.arrays(np.float32, (d,), elements=st.floats(-1, 1, width=32, allow_subnormal=True))
    ) * np.float32(scale)
    return block, query.astype(np.float32)


@settings(max_examples=300, deadline=None)
@given(blocks_and_questions())
def test_each_product_is_within_the_stated_bound_of_the_exact_one(case):
    block, query = case
    got = half_products(block, half_query(query))
    exact = block.astype(np.float64) @ query.astype(np.float64)
    assert got.dtype == np.float32 and got.shape == (block.shape[0],)
    slack = 2.0**-50 * (np.abs(block.astype(np.float64)) @ np.abs(query.astype(np.float64)))  # float64's own
    assert np.all(np.abs(got.astype(np.float64) - exact) <= bound(block, query) + slack)


def test_the_bound_is_about_float32s_own_on_unit_vectors():
    """On the vectors a search meets, the kernel is as close to the exact product as numpy's float32."""
    rng = np.random.default_rng(3)
    block = rng.standard_normal((2000, 384))
    block = (block / np.linalg.norm(block, axis=1, keepdims=True)).astype(np.float16)
    query = rng.standard_normal(384)
    query = (query / np.linalg.norm(query)).astype(np.float32)
    exact = block.astype(np.float64) @ query.astype(np.float64)
    ours = np.abs(half_products(block, half_query(query)) - exact)
    numpys = np.abs(block.astype(np.float32) @ query - exact)
    assert ours.max() < 1e-7 and ours.max() <= 2 * numpys.max()


@settings(max_examples=100, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 300), st.integers(1, 64))
def test_a_rows_product_does_not_depend_on_the_rows_computed_with_it(seed, rows, d):
    """A list scanned whole, a gather of some of its rows, each row alone: the same bits a row."""
    rng = np.random.default_rng(seed)
    block = rng.standard_normal((rows, d)).astype(np.float16)
    query = half_query(rng.standard_normal(d).astype(np.float32))
    whole = half_products(block, query)
    start = int(rng.integers(0, rows))
    stop = int(rng.integers(start + 1, rows + 1))
    assert np.array_equal(half_products(block[start:stop], query), whole[start:stop])
    picked = np.sort(rng.choice(rows, size=min(rows, 7), replace=False))
    assert np.array_equal(half_products(block[picked], query), whole[picked])
    assert np.array_equal(half_products(block[start : start + 1], query), whole[start : start + 1])
    assert half_products(block[:0], query).shape == (0,)


def test_a_zero_question_and_an_empty_block():
    block = np.ones((3, 5), dtype=np.float16)
    assert np.array_equal(half_products(block, half_query(np.zeros(5, np.float32))), np.zeros(3, np.float32))
    assert half_products(block[:0], half_query(np.ones(5, np.float32))).shape == (0,)


ROWS, DIMENSIONS = 2000, 32


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    rng = np.random.default_rng(0)
    centres = rng.standard_normal((30, DIMENSIONS))
    vectors = centres[rng.integers(0, 30, ROWS)] + 0.4 * rng.standard_normal((ROWS, DIMENSIONS))
    vectors = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    writer = IndexWriter(DIMENSIONS)
    writer.add(list(range(1, ROWS + 1)), [1 + i // 10 for i in range(ROWS)], [["w"]] * ROWS, list(vectors))
    lists = build_lists(vectors, index_id="half")
    return MappedIndex(writer.write(tmp_path_factory.mktemp("index"), "h", ivf=lists))


@settings(max_examples=50, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 50))
def test_the_probe_and_the_exact_scan_give_each_row_the_same_score_and_the_same_top_k(written, seed, k):
    """Every list probed, the IVF's products are the exact scan's to the bit, so its top k is the scan's;
    a probe of fewer lists gives each row it reads the scan's score too."""
    index = written
    question = np.random.default_rng(seed).standard_normal(DIMENSIONS).astype(np.float32)
    question /= np.linalg.norm(question)
    exact = index.cosine(question)
    ids, products = index.ivf.scan(question, index.ivf.nlist, index.products)
    assert np.array_equal(products, exact[ids])
    assert np.array_equal(np.sort(ids[top_rows(products, None, k)]), np.sort(top_rows(exact, None, k)))
    ids, products = index.ivf.scan(question, 2, index.products)
    assert np.array_equal(products, exact[ids])
    assert np.array_equal(index.cosine_of_rows(question, np.sort(ids)), exact[np.sort(ids)])
    assert math.isclose(float(exact.max()), float(np.max(index.vector_matrix() @ question)), abs_tol=1e-6)
