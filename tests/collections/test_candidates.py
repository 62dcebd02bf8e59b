"""The IVF path's candidates (collections_app/services/candidates.py): pure parts, without a database."""

import numpy as np
import pytest

from collections_app.mapped_index import IndexWriter, MappedIndex
from collections_app.services import candidates
from ragsite.lexical import terms


@pytest.mark.parametrize("dtype", ["<f4", "<f2"])
def test_the_probed_cosines_in_blocks_equal_one_product_over_every_probed_window(tmp_path, monkeypatch, dtype):
    """The probe gathers its windows a block at a time (a web worker's memory, docs/decisions.md); each
    window's product is the one a single gather of them all gives, to the bit, in the probe's order."""
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((1000, 48)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    writer = IndexWriter(48, vector_dtype=dtype)
    writer.add(list(range(1000)), [i // 10 for i in range(1000)], [terms("w")] * 1000, [v[None, :] for v in vectors])
    index = MappedIndex(writer.write(tmp_path, "b1"))
    members = np.sort(rng.choice(1000, size=777, replace=False))
    question = vectors[3]
    whole = np.asarray(index.vectors[members], dtype=np.float32) @ question
    monkeypatch.setattr(candidates, "PROBE_BLOCK", 64)  # 13 blocks, the last one short
    assert np.array_equal(candidates.probed_cosine(index, members, question), whole)
    assert candidates.probed_cosine(index, members[:0], question).shape == (0,)
