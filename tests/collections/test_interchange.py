"""The rag/<index_id>/ format of seed 004: byte-exact round trips and validation that names file and field."""

import json
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collections_app import interchange as fmt
from ragsite.lexical import BM25Index, idf, terms

CHUNKS = [
    ("docs/leave.md", "Carry-over of annual leave is capped at five days a year."),
    ("docs/leave.md", "Unused days beyond five lapse on the first of April."),
    ("docs/security.md", "Laptops must use full-disk encryption. Größe ÉTÉ naïve 東京 x_1"),
]


def unit_rows(n, dim, seed=0):
    rows = np.random.default_rng(seed).standard_normal((n, dim))
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def sample_index(chunks=CHUNKS, dim=8) -> fmt.RagIndex:
    seen: dict[str, int] = {}
    items = []
    for doc_id, text in chunks:
        items.append(fmt.Chunk(doc_id=doc_id, k=seen.get(doc_id, 0), text=text, n_tokens=len(terms(text))))
        seen[doc_id] = seen.get(doc_id, 0) + 1
    meta = fmt.Meta(
        index_id="docs",
        created_at="2026-10-09T12:00:00Z",
        n_chunks=len(items),
        dim=dim,
        embedding_model="smol-135m",
        tokenizer="smol-135m",
        chunker={"max_tokens": 256, "overlap": 32},
    )
    return fmt.build_index(meta=meta, chunks=items, vectors=unit_rows(len(items), dim))


@pytest.fixture
def files():
    return fmt.encode_index(sample_index())


def test_meta_json_has_the_seeds_keys_in_order():
    meta = json.loads(fmt.encode_meta(sample_index().meta))
    assert list(meta) == [
        "index_id",
        "created_at",
        "n_chunks",
        "dim",
        "embedding_model",
        "tokenizer",
        "chunker",
        "bm25",
    ]
    assert meta["bm25"] == {"k1": 1.2, "b": 0.75} and meta["n_chunks"] == 3


def test_docs_jsonl_lines_are_chunks_in_order_with_sha256_fingerprints(files):
    lines = files[fmt.DOCS].decode().splitlines()
    first = json.loads(lines[0])
    assert list(first) == ["chunk_id", "doc_id", "source", "uri", "text", "n_tokens", "fingerprint"]
    assert [json.loads(line)["chunk_id"] for line in lines] == [
        "docs/leave.md#0",
        "docs/leave.md#1",
        "docs/security.md#0",
    ]
    assert first["source"] == "file" and first["uri"] == "docs/leave.md"
    import hashlib

    assert first["fingerprint"] == hashlib.sha256(first["text"].encode()).hexdigest()
    assert "東京" in files[fmt.DOCS].decode()  # written as UTF-8, not \u escapes


def test_vectors_f32_is_rows_of_little_endian_float32_without_header(files):
    index = sample_index()
    assert len(files[fmt.VECTORS]) == 3 * 8 * 4
    assert struct.unpack("<f", files[fmt.VECTORS][:4])[0] == index.vectors[0, 0]


def test_bm25_idx_follows_the_seeds_byte_layout(files):
    data = files[fmt.BM25]
    magic, version, n_docs, n_terms, avgdl = struct.unpack_from("<4sIIId", data)
    texts = [text for _d, text in CHUNKS]
    lengths = [len(terms(t)) for t in texts]
    assert (magic, version, n_docs) == (b"TLBM", 1, 3)
    assert avgdl == sum(lengths) / 3
    assert list(struct.unpack_from("<3I", data, 24)) == lengths
    vocabulary = sorted({term for t in texts for term in terms(t)}, key=lambda t: t.encode())
    assert n_terms == len(vocabulary)
    # Walk the terms with an independent reader.
    offset = 24 + 12
    for expected in vocabulary:
        (length,) = struct.unpack_from("<H", data, offset)
        term = data[offset + 2 : offset + 2 + length].decode()
        df, size = struct.unpack_from("<II", data, offset + 2 + length)
        postings = data[offset + 10 + length : offset + 10 + length + size]
        assert term == expected
        docs = [i for i, t in enumerate(texts) if term in terms(t)]
        assert df == len(docs)
        pairs, value, shift, numbers = [], 0, 0, []
        for byte in postings:
            value |= (byte & 0x7F) << shift
            shift += 7
            if byte < 0x80:
                numbers.append(value)
                value = shift = 0
        pairs = list(zip(numbers[::2], numbers[1::2], strict=True))
        assert np.cumsum([gap for gap, _tf in pairs]).tolist() == docs
        assert [tf for _g, tf in pairs] == [terms(texts[d]).count(term) for d in docs]
        offset += 10 + length + size
    assert offset == len(data)


def test_leb128_uses_continuation_bits_for_large_gaps():
    texts = ["zebra"] + ["other"] * 200 + ["zebra " * 300]
    data = fmt.encode_bm25(BM25Index.from_texts(texts))
    back = fmt.decode_bm25(data)
    zebra = back.term_ids["zebra"]
    lo, hi = back.indptr[zebra], back.indptr[zebra + 1]
    assert back.postings_doc[lo:hi].tolist() == [0, 201] and back.postings_tf[lo:hi].tolist() == [1, 300]
    assert fmt.encode_bm25(back) == data


def test_writing_what_was_read_gives_identical_bytes(tmp_path, files):
    folder = fmt.write_index(tmp_path, sample_index())
    assert folder == tmp_path / "rag" / "docs"
    assert {p.name for p in folder.iterdir()} == set(fmt.FILES)
    again = fmt.encode_index(fmt.read_index(folder, index_id="docs"))
    assert again == files
    assert fmt.read_files(folder) == files


def test_read_bm25_scores_as_the_index_built_from_texts(files):
    stored = fmt.decode_bm25(files[fmt.BM25])
    rebuilt = BM25Index.from_texts(text for _d, text in CHUNKS)
    question = terms("five days leave encryption")
    assert np.allclose(stored.scores(question), rebuilt.scores(question), rtol=0, atol=1e-12)
    assert np.array_equal(stored.idf, idf(3, rebuilt.df))


corpora = st.lists(
    st.lists(
        st.sampled_from(["a", "b", "leave", "days", "Größe", "東京", "x_1", "Σ", "42", "é", ". ", "  "]),
        max_size=30,
    ).map(" ".join),
    min_size=1,
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(corpora)
def test_bm25_idx_write_read_write_is_identical(texts):
    data = fmt.encode_bm25(BM25Index.from_texts(texts))
    back = fmt.decode_bm25(data)
    assert fmt.encode_bm25(back) == data
    assert back.vocabulary == BM25Index.from_texts(texts).vocabulary


@settings(max_examples=30, deadline=None)
@given(corpora)
def test_whole_index_round_trips_byte_exact(texts):
    index = sample_index([(f"d{i % 3}.md", t) for i, t in enumerate(texts)], dim=4)
    files = fmt.encode_index(index)
    assert fmt.encode_index(fmt.decode_index(files, index_id="docs")) == files


# --- validation ----------------------------------------------------------------


def broken(files, name, data):
    return {**files, name: data}


def error_of(files, **kwargs) -> fmt.InterchangeError:
    with pytest.raises(fmt.InterchangeError) as caught:
        fmt.decode_index(files, **kwargs)
    return caught.value


def test_wrong_magic_is_named(files):
    error = error_of(broken(files, fmt.BM25, b"XXXX" + files[fmt.BM25][4:]))
    assert (error.file, error.field) == ("bm25.idx", "magic")


def test_wrong_version_is_named(files):
    data = files[fmt.BM25][:4] + struct.pack("<I", 2) + files[fmt.BM25][8:]
    error = error_of(broken(files, fmt.BM25, data))
    assert (error.file, error.field) == ("bm25.idx", "version") and "found 2" in str(error)


def test_truncated_bm25_is_named(files):
    error = error_of(broken(files, fmt.BM25, files[fmt.BM25][:-3]))
    assert error.file == "bm25.idx" and "truncated" in str(error)


def test_bm25_that_does_not_match_the_texts_is_refused(files):
    other = fmt.encode_bm25(BM25Index.from_texts(["something else", "entirely", "here"]))
    error = error_of(broken(files, fmt.BM25, other))
    assert error.file == "bm25.idx" and error.field.startswith("doc_len")


def test_vectors_of_the_wrong_size_are_refused(files):
    error = error_of(broken(files, fmt.VECTORS, files[fmt.VECTORS][:-4]))
    assert (error.file, error.field) == ("vectors.f32", "size")
    assert "n_chunks * dim * 4 = 3 * 8 * 4 = 96" in str(error)


def test_a_row_that_is_not_unit_length_is_named(files):
    vectors = np.frombuffer(files[fmt.VECTORS], dtype="<f4").reshape(3, 8).copy()
    vectors[1] *= 2
    error = error_of(broken(files, fmt.VECTORS, vectors.tobytes()))
    assert (error.file, error.field) == ("vectors.f32", "row 1")


def test_a_nan_row_is_not_unit_length(files):
    vectors = np.frombuffer(files[fmt.VECTORS], dtype="<f4").reshape(3, 8).copy()
    vectors[2, 0] = np.nan
    assert error_of(broken(files, fmt.VECTORS, vectors.tobytes())).field == "row 2"


def edit_line(files, number, change):
    lines = files[fmt.DOCS].decode().splitlines()
    obj = json.loads(lines[number - 1])
    change(obj)
    lines[number - 1] = json.dumps(obj, ensure_ascii=False)
    return broken(files, fmt.DOCS, ("\n".join(lines) + "\n").encode())


def test_a_chunk_id_that_does_not_resolve_is_named_with_its_line(files):
    error = error_of(edit_line(files, 2, lambda o: o.update(chunk_id="docs/leave.md#7")))
    assert (error.file, error.field, error.line) == ("docs.jsonl", "chunk_id", 2)
    assert "docs/leave.md#1" in str(error)


def test_a_chunk_id_of_another_document_does_not_resolve(files):
    error = error_of(edit_line(files, 3, lambda o: o.update(chunk_id="docs/leave.md#2")))
    assert (error.field, error.line) == ("chunk_id", 3)


def test_missing_n_tokens_is_named(files):
    error = error_of(edit_line(files, 1, lambda o: o.pop("n_tokens")))
    assert (error.file, error.field, error.line) == ("docs.jsonl", "n_tokens", 1) and "missing" in str(error)


def test_n_tokens_must_be_an_integer(files):
    error = error_of(edit_line(files, 1, lambda o: o.update(n_tokens="12")))
    assert error.field == "n_tokens" and "integer" in str(error)


def test_a_fingerprint_that_is_not_the_texts_hash_is_named(files):
    error = error_of(edit_line(files, 3, lambda o: o.update(fingerprint="0" * 64)))
    assert (error.field, error.line) == ("fingerprint", 3)


def test_malformed_json_line_is_named_by_number(files):
    lines = files[fmt.DOCS].decode().splitlines()
    lines[1] = lines[1][:-5]
    error = error_of(broken(files, fmt.DOCS, ("\n".join(lines) + "\n").encode()))
    assert (error.file, error.line) == ("docs.jsonl", 2) and "malformed JSON" in str(error)
    assert str(error).startswith("docs.jsonl line 2")


def test_line_count_must_match_n_chunks(files):
    lines = files[fmt.DOCS].decode().splitlines(keepends=True)
    error = error_of(broken(files, fmt.DOCS, "".join(lines[:2]).encode()))
    assert error.file == "docs.jsonl" and "n_chunks = 3" in str(error)


def test_meta_fields_are_checked(files):
    meta = json.loads(files[fmt.META])
    del meta["dim"]
    error = error_of(broken(files, fmt.META, json.dumps(meta).encode()))
    assert (error.file, error.field) == ("meta.json", "dim")
    meta = json.loads(files[fmt.META])
    meta["chunker"] = {"max_tokens": 256}
    assert error_of(broken(files, fmt.META, json.dumps(meta).encode())).field == "chunker.overlap"
    assert error_of(broken(files, fmt.META, b"{not json")).file == "meta.json"


def test_index_id_must_match_the_directory(files):
    error = error_of(files, index_id="other")
    assert (error.file, error.field) == ("meta.json", "index_id")


def test_a_missing_file_is_named(tmp_path):
    folder = fmt.write_index(tmp_path, sample_index())
    (folder / "bm25.idx").unlink()
    with pytest.raises(fmt.InterchangeError) as caught:
        fmt.read_index(folder)
    assert (caught.value.file, caught.value.problem) == ("bm25.idx", "missing")


def test_terms_out_of_byte_order_are_refused():
    index = BM25Index.from_texts(["alpha beta"])
    data = bytearray(fmt.encode_bm25(index))
    # Swap the two one-posting entries: "beta" before "alpha".
    start = 24 + 4
    alpha = bytes(data[start : start + 2 + 5 + 8 + 2])
    beta = bytes(data[start + len(alpha) :])
    with pytest.raises(fmt.InterchangeError) as caught:
        fmt.decode_bm25(bytes(data[:start]) + beta + alpha)
    assert caught.value.field == "term 1"


def test_a_wrong_document_length_is_named_as_doc_len_not_avgdl(files):
    data = bytearray(files[fmt.BM25])
    struct.pack_into("<I", data, 24, struct.unpack_from("<I", data, 24)[0] + 1)  # doc_len[0] + 1
    error = error_of(broken(files, fmt.BM25, bytes(data)))
    assert (error.file, error.field) == ("bm25.idx", "doc_len[0]")


def test_a_big_endian_n_docs_is_named_as_n_docs(files):
    data = bytearray(files[fmt.BM25])
    struct.pack_into(">I", data, 8, 3)
    error = error_of(broken(files, fmt.BM25, bytes(data)))
    assert (error.file, error.field) == ("bm25.idx", "n_docs") and "50331648" in str(error)
    alone = pytest.raises(fmt.InterchangeError, fmt.decode_bm25, bytes(data))  # without the texts to compare
    assert alone.value.field == "n_docs"


def test_an_index_whose_chunk_ids_would_not_resolve_is_not_built():
    """Nothing is written that a reader would refuse: k counts each document's chunks from 0."""
    index = sample_index()
    chunks = [index.chunks[0], fmt.Chunk(doc_id="docs/leave.md", k=2, text="x", n_tokens=1), index.chunks[2]]
    with pytest.raises(fmt.InterchangeError) as caught:
        fmt.build_index(meta=index.meta, chunks=chunks, vectors=index.vectors)
    assert (caught.value.file, caught.value.field, caught.value.line) == ("docs.jsonl", "chunk_id", 2)


def test_pages_are_an_extra_field_written_only_when_known_and_checked_when_read():
    plain = fmt.Chunk(doc_id="a.md", k=0, text="words", n_tokens=1)
    paged = fmt.Chunk(doc_id="b.pdf", k=0, text="more", n_tokens=1, pages=(2, 3))
    lines = fmt.encode_docs([plain, paged]).decode().splitlines()
    assert "pages" not in json.loads(lines[0]) and json.loads(lines[1])["pages"] == [2, 3]
    assert lines[1].endswith(', "pages": [2, 3]}')
    assert [c.pages for c in fmt.decode_docs(fmt.encode_docs([plain, paged]))] == [None, (2, 3)]
    for bad in ([0, 1], [3, 2], [1], "1-2", [1.0, 2]):
        line = json.loads(lines[1]) | {"pages": bad}
        with pytest.raises(fmt.InterchangeError) as error:
            fmt.decode_docs((json.dumps(line) + "\n").encode())
        assert "pages" in str(error.value)
