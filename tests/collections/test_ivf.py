"""IVF: PCG32 and FNV-1a as specified, deterministic centroids per index_id, recall against the exact scan."""

import numpy as np
import pytest

from collections_app.ivf import PCG32, IVFIndex, flat_search, fnv1a64, kmeans_plus_plus, recall_at_k, rng_for


def unit(rows):
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def clustered(n=3000, dim=64, clusters=40, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((clusters, dim))
    return unit(centres[rng.integers(0, clusters, n)] + 0.35 * rng.standard_normal((n, dim)))


def test_pcg32_matches_the_reference_demo_output():
    # pcg32-demo from pcg-c-basic: pcg32_srandom_r(&rng, 42u, 54u), first six outputs.
    rng = PCG32.from_sequence(42, 54)
    assert [rng.next_u32() for _ in range(6)] == [
        0xA15C02B7, 0x7B47F409, 0xBA1D3330, 0x83D2F293, 0xBFA4784B, 0xCBED606E,
    ]


def test_the_stated_increment_is_pcg_srandom_with_its_sequence():
    a, b = PCG32(1234), PCG32.from_sequence(1234, 721347520444481703)
    assert [a.next_u32() for _ in range(5)] == [b.next_u32() for _ in range(5)]


def test_fnv1a64_reference_values():
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8


def test_bounded_stays_in_range_and_covers_it():
    rng = rng_for("docs")
    seen = {rng.bounded(7) for _ in range(500)}
    assert seen == set(range(7))


def test_the_same_index_id_gives_the_same_centroids():
    vectors = clustered(1000)
    one, two = IVFIndex.build(vectors, index_id="docs"), IVFIndex.build(vectors, index_id="docs")
    assert np.array_equal(one.centroids, two.centroids) and np.array_equal(one.assignment, two.assignment)
    other = IVFIndex.build(vectors, index_id="handbook")
    assert not np.array_equal(one.centroids, other.centroids)


def test_kmeans_plus_plus_picks_distinct_rows():
    vectors = clustered(500)
    seeds = kmeans_plus_plus(vectors, 30, rng_for("docs"))
    assert len(set(seeds.tolist())) == 30
    # Identical rows never give a duplicate centre.
    same = np.repeat(vectors[:2], 10, axis=0)
    assert len(set(kmeans_plus_plus(same, 5, rng_for("x")).tolist())) == 5


def test_every_row_is_in_exactly_one_list():
    ivf = IVFIndex.build(clustered(800), index_id="docs")
    assert sorted(np.concatenate(ivf.lists).tolist()) == list(range(800))
    assert ivf.nlist == 28


def test_probing_every_list_is_the_exact_scan():
    vectors = clustered(600)
    ivf = IVFIndex.build(vectors, index_id="docs")
    query = vectors[5]
    ids, scores = ivf.search(query, 10, nprobe=ivf.nlist)
    exact_ids, exact_scores = flat_search(vectors, query, 10)
    assert ids.tolist() == exact_ids.tolist() and np.allclose(scores, exact_scores)
    assert recall_at_k(ivf, vectors[:20], 10, nprobe=ivf.nlist) == 1.0


@pytest.mark.parametrize(("nprobe", "floor"), [(4, 0.95), (8, 0.99)])
def test_recall_at_10_on_clustered_vectors(nprobe, floor):
    vectors = clustered(3000)
    ivf = IVFIndex.build(vectors, index_id="docs")
    queries = unit(vectors[np.random.default_rng(1).integers(0, 3000, 100)]
                   + 0.1 * np.random.default_rng(2).standard_normal((100, 64)))
    assert recall_at_k(ivf, queries, 10, nprobe=nprobe) >= floor


def test_recall_grows_with_nprobe_on_uniform_vectors():
    # Uniform random directions have no clusters: the hard case, where IVF needs many probes.
    vectors = unit(np.random.default_rng(3).standard_normal((3000, 64)))
    ivf = IVFIndex.build(vectors, index_id="docs")
    queries = unit(np.random.default_rng(4).standard_normal((50, 64)))
    figures = [recall_at_k(ivf, queries, 10, nprobe=p) for p in (1, 8, 32, ivf.nlist)]
    assert figures == sorted(figures) and figures[-1] == 1.0
