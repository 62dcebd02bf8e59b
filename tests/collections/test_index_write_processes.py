"""Writing an index with its rows tokenized in other processes (issue 29, item 5): the same files, byte
for byte, as tokenizing them in the writing process; and a block's postings as the writer made them."""

from contextlib import contextmanager

import numpy as np
import pytest

from collections_app.index.postings import block_postings
from collections_app.models import CollectionBuilt
from collections_app.services import indexes
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from tests.conftest import HANDBOOK

pytestmark = pytest.mark.django_db


def files_of(path):
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in sorted(path.rglob("*")) if p.is_file()}


def test_an_index_tokenized_in_other_processes_is_the_one_tokenized_here(
    agent, knowledge_folder, settings, monkeypatch
):
    collection = create_collection(agent=agent, name="shelf", method="fixed", size=60)
    notes = {f"n{i}.md": f"# N {i}\n\nNote {i} on cobalt {i % 3}.\n" for i in range(20)}
    knowledge_folder("shelf", {**HANDBOOK, **notes})
    assert build_collection(collection=collection).status == "succeeded"
    monkeypatch.setattr(indexes, "ROWS_PER_BLOCK", 4)  # many blocks, so several are in flight at once
    written = {}
    for processes in (1, 2):
        settings.INDEX_WRITE_PROCESSES = processes
        root = indexes.collection_root(collection.pk)
        for entry in root.iterdir():
            if entry.is_dir():
                indexes.shutil.rmtree(entry)
        key, path = indexes.write_index(collection=collection)
        written[processes] = files_of(path)
    built = CollectionBuilt.objects.get(collection=collection)
    assert built.passages > 3 * 4  # more than two blocks: the pool was used
    assert written[1] == written[2]


def test_a_blocks_postings_count_each_term_once_a_row_in_term_then_row_order():
    found = block_postings([["b", "a", "b"], [], ["a", "c"]])
    assert found.vocabulary == ["b", "a", "c"]
    assert found.lengths.tolist() == [3, 0, 2]
    pairs = [
        (found.vocabulary[t], int(d), int(f)) for t, d, f in zip(found.term, found.doc, found.tf, strict=True)
    ]
    assert pairs == [("b", 0, 2), ("a", 0, 1), ("a", 2, 1), ("c", 2, 1)]
    empty = block_postings([[], []])
    assert empty.vocabulary == [] and empty.term.size == 0 and np.array_equal(empty.lengths, [0, 0])


def test_when_the_tokenizing_processes_break_the_index_is_tokenized_here(
    agent, knowledge_folder, settings, monkeypatch, caplog
):
    """A spawned process imports the program's main module; a script that works outside its
    ``__main__`` guard breaks the pool. The index is then written in the writing process, the same."""
    collection = create_collection(agent=agent, name="shelf", method="fixed", size=60)
    notes = {f"n{i}.md": f"# N {i}\n\nNote {i} on cobalt {i % 3}.\n" for i in range(20)}
    knowledge_folder("shelf", {**HANDBOOK, **notes})
    assert build_collection(collection=collection).status == "succeeded"
    monkeypatch.setattr(indexes, "ROWS_PER_BLOCK", 4)
    settings.INDEX_WRITE_PROCESSES = 1
    built = CollectionBuilt.objects.get(collection=collection)
    expected = indexes._write_rows(collection, built)

    class Broken:
        def submit(self, *args, **kwargs):
            raise indexes.BrokenProcessPool("a tokenizer died")

    @contextmanager
    def broken_pool(rows, processes, rows_per_block):
        yield Broken() if processes > 1 else None

    settings.INDEX_WRITE_PROCESSES = 2
    monkeypatch.setattr(indexes, "tokenizers", broken_pool)
    with caplog.at_level("WARNING", logger="ragsite.search"):
        found = indexes._write_rows(collection, built)
    assert any("tokenizing in this process" in r.getMessage() for r in caplog.records)
    for mine, theirs in zip(found[:3], expected[:3], strict=True):
        assert mine.vocabulary == theirs.vocabulary and mine.rows == theirs.rows
    assert found[3] and expected[3]


def test_the_ivf_lists_made_beside_the_texts_are_the_ones_made_from_the_rows_after_them(
    agent, knowledge_folder, settings
):
    """The lists are made in a thread while the texts are tokenized (services.indexes.vectors), from
    the vectors read ahead: the same lists, bit for bit, as `build_lists` over every stored vector."""
    from collections_app.index.ivf import build_lists
    from collections_app.index.mapped import MappedIndex
    from collections_app.index.vector_codec import decode
    from collections_app.models import Paragraph

    collection = create_collection(agent=agent, name="shelf", method="fixed", size=60)
    notes = {f"n{i}.md": f"# N {i}\n\nNote {i} on cobalt {i % 3}.\n" for i in range(20)}
    knowledge_folder("shelf", {**HANDBOOK, **notes})
    assert build_collection(collection=collection).status == "succeeded"
    settings.IVF_MIN_PARAGRAPHS = 1
    for entry in indexes.collection_root(collection.pk).iterdir():
        if entry.is_dir():
            indexes.shutil.rmtree(entry)
    _key, path = indexes.write_index(collection=collection, fetch=False)  # from the rows, not the stored copy
    built = CollectionBuilt.objects.get(collection=collection)
    blobs = (
        Paragraph.objects.filter(collection=collection)
        .order_by("ordinal")
        .values_list("embedding", flat=True)
    )
    matrix = np.concatenate([decode(blob, built.dimensions) for blob in blobs])
    expected = build_lists(matrix, index_id=built.ivf_index_id, target_recall=float(settings.IVF_RECALL))
    stored = MappedIndex(path).ivf
    assert stored is not None and stored.nprobe == expected.nprobe
    for name, array in expected.arrays().items():
        assert np.array_equal(stored.arrays()[name], array), name


def test_rows_that_differ_between_the_vectors_and_the_texts_read_are_not_written(
    agent, knowledge_folder, monkeypatch
):
    """A build committed between the two reads: the rows met are not the same, so the write starts over."""
    collection = create_collection(agent=agent, name="shelf", method="fixed", size=60)
    knowledge_folder("shelf", HANDBOOK)
    assert build_collection(collection=collection).status == "succeeded"
    built = CollectionBuilt.objects.get(collection=collection)
    vectors = indexes.read_vectors(collection, built, indexes.ROWS_PER_BLOCK)
    assert indexes._write_rows(collection, built, vectors)[3]
    other = vectors._replace(ids=vectors.ids + 1)  # the ids another build's rows would have
    assert not indexes._write_rows(collection, built, other)[3]
