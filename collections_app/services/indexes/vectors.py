"""A build's vectors read at once, ahead of its texts, and its IVF lists made from them in a thread of
their own while the texts are tokenized (docs/decisions/0094).

The two halves of writing an index need nothing of each other: the lists read only the vectors, the
postings only the texts. k-means++ and Lloyd's rounds spend their time in BLAS and in numpy's loops over
whole arrays, which let go of the GIL, so on a machine with a second core free the lists cost the write
little more than the texts' own time (at 100,000 rows the lists were 14 s of the write's 23 s, one after
the other). The lists are the same bits as before: the same float32 matrix, widened from the same float16
values, goes to the same `ivf.build_lists`.
"""

from __future__ import annotations

from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from typing import NamedTuple

import numpy as np

from ragsite.errors import Conflict

from ...conf import settings
from ...index.ivf import IVFLists, build_lists
from ...index.vector_codec import STORED_DTYPE
from ...models import Collection, CollectionBuilt, Paragraph


class BuildVectors(NamedTuple):
    """Every stored vector of a build, in row order: ``matrix[i]`` belongs to row ``row[i]`` (a paragraph's
    windows are consecutive), and ``ids`` is each row's paragraph id (to check the texts' read against)."""

    ids: np.ndarray  # int64, one a row
    matrix: np.ndarray  # (vectors, d) float32
    row: np.ndarray  # int32, one a vector


def read_vectors(collection: Collection, built: CollectionBuilt, rows_per_block: int) -> BuildVectors:
    """The build's vectors, one statement, widened a block of rows at a time (one cast a block, not one a
    row); Conflict ``width_mismatch`` when a stored vector is not a whole number of the build's width."""
    dimensions = int(built.dimensions or 0)
    width = dimensions * STORED_DTYPE.itemsize
    ids: list[np.ndarray] = []
    matrices: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    rows = Paragraph.objects.filter(collection=collection).order_by("ordinal").values_list("id", "embedding")
    at = 0
    block: list[tuple] = []

    def flush() -> None:
        nonlocal at
        ids.append(np.fromiter((pk for pk, _blob in block), dtype=np.int64, count=len(block)))
        if dimensions:
            present = [(offset, blob) for offset, (_pk, blob) in enumerate(block) if blob is not None]
            sizes = np.fromiter((len(blob) for _o, blob in present), dtype=np.int64, count=len(present))
            if np.any((sizes == 0) | (sizes % width != 0)):
                wide = f"holds vectors that are not {dimensions} wide"
                raise Conflict(f'collection "{collection.name}" {wide}; rebuild it', code="width_mismatch")
            if present:
                joined = b"".join(bytes(blob) for _o, blob in present)
                matrices.append(
                    np.frombuffer(joined, STORED_DTYPE).astype(np.float32).reshape(-1, dimensions)
                )
                offsets = np.fromiter((o for o, _b in present), dtype=np.int32, count=len(present))
                owners.append(np.repeat(offsets + np.int32(at), sizes // width))
        at += len(block)
        block.clear()

    for row in rows.iterator(chunk_size=rows_per_block):
        block.append(row)
        if len(block) >= rows_per_block:
            flush()
    if block:
        flush()
    return BuildVectors(
        ids=np.concatenate(ids) if ids else np.zeros(0, np.int64),
        matrix=np.concatenate(matrices) if matrices else np.zeros((0, dimensions), np.float32),
        row=np.concatenate(owners) if owners else np.zeros(0, np.int32),
    )


def wants_lists(vectors: BuildVectors) -> bool:
    """Whether search will take the approximate path for this build (IVF_MIN_PARAGRAPHS), so its index
    carries IVF lists."""
    threshold = int(settings.IVF_MIN_PARAGRAPHS)
    return vectors.matrix.shape[0] > 0 and threshold > 0 and vectors.ids.size >= threshold


@contextmanager
def lists_beside(vectors: BuildVectors, built: CollectionBuilt):
    """A future of the build's IVF lists (None when it has none), made in a thread while the body runs.
    Leaving the block waits for the thread (a failed write does not leave it running)."""
    if not wants_lists(vectors):
        yield None
        return
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="index-lists") as pool:
        future: Future[IVFLists] = pool.submit(
            build_lists,
            vectors.matrix,
            index_id=built.ivf_index_id,
            target_recall=float(settings.IVF_RECALL),
        )
        yield future


__all__ = ["BuildVectors", "lists_beside", "read_vectors", "wants_lists"]
