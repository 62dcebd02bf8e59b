"""The ``rag/<index_id>/`` interchange format of seed 004: meta.json, docs.jsonl, vectors.f32, bm25.idx.

Pure: no models, no settings. :func:`write_index` and :func:`read_index` move a whole index between
a directory and a :class:`RagIndex`; the ``encode_*`` / ``decode_*`` pairs do the same for one file's
bytes, so each file can be tested on its own. All integers are little-endian.

Every writer here is canonical: decoding a file this module wrote and encoding the result gives the
same bytes. ``bm25.idx`` is never taken on trust: it is what :class:`~.lexical.BM25Index` builds from
the chunk texts with :func:`~.lexical.terms`, so a reader recomputes it from ``docs.jsonl`` and
compares (:func:`read_index` does).

A file that breaks the format raises :class:`InterchangeError`, naming the file, the field and,
for docs.jsonl, the line.
"""

from __future__ import annotations

import hashlib
import json
import math
import struct
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ragsite.lexical import DEFAULT_B, DEFAULT_K1, BM25Index

META, DOCS, VECTORS, BM25 = "meta.json", "docs.jsonl", "vectors.f32", "bm25.idx"
FILES = (META, DOCS, VECTORS, BM25)

MAGIC = b"TLBM"
VERSION = 1
SOURCE = "file"
# How far a row's L2 norm may be from 1: float32 rounding of a normalised row stays within ~1e-6;
# this leaves room for another writer's float arithmetic while catching unnormalised rows.
UNIT_TOLERANCE = 1e-3
# avgdl is a float64 mean; another writer may sum in another order and differ in the last bits.
AVGDL_RELATIVE_TOLERANCE = 1e-9

_HEADER = struct.Struct("<4sIIId")
_U16 = struct.Struct("<H")
_TERM_COUNTS = struct.Struct("<II")


class InterchangeError(ValueError):
    """A file of an index breaks seed 004's format; says which file, which field and, if any, which line."""

    def __init__(self, file: str, field: str, problem: str, *, line: int | None = None):
        self.file, self.field, self.problem, self.line = file, field, problem, line
        where = f"{file} line {line}" if line is not None else file
        super().__init__(f"{where}, {field}: {problem}")


@dataclass(frozen=True)
class Meta:
    """meta.json. ``chunker`` holds the seed's ``max_tokens`` and ``overlap`` plus ragsite's own keys
    (``method``, and ``chars`` for character-counted methods) that other readers may ignore."""

    index_id: str
    created_at: str
    n_chunks: int
    dim: int
    embedding_model: str
    tokenizer: str
    chunker: dict
    k1: float = DEFAULT_K1
    b: float = DEFAULT_B


@dataclass(frozen=True)
class Chunk:
    """One line of docs.jsonl. ``k`` is the chunk's position in its document (the k of doc_id#k)."""

    doc_id: str
    k: int
    text: str
    n_tokens: int
    uri: str | None = None  # None: the doc_id, as ragsite writes it
    source: str = SOURCE
    # ragsite's extra field "pages": the first and last page (PDF page, slide, sheet) of the text, or
    # None for a document without pages, when the field is left out and the line is the seed's alone.
    pages: tuple[int, int] | None = None

    @property
    def chunk_id(self) -> str:
        return f"{self.doc_id}#{self.k}"

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.text)


@dataclass
class RagIndex:
    """A whole index: the four files' contents, already checked against one another."""

    meta: Meta
    chunks: list[Chunk]
    vectors: np.ndarray  # (n_chunks, dim) float32, unit rows
    bm25: BM25Index = field(repr=False)


def fingerprint(text: str) -> str:
    """docs.jsonl's fingerprint: the SHA-256 of the text's UTF-8 bytes, in hex."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- meta.json ----------------------------------------------------------------


def encode_meta(meta: Meta) -> bytes:
    """The seed's keys in the seed's order, then a newline."""
    payload = {
        "index_id": meta.index_id,
        "created_at": meta.created_at,
        "n_chunks": meta.n_chunks,
        "dim": meta.dim,
        "embedding_model": meta.embedding_model,
        "tokenizer": meta.tokenizer,
        "chunker": meta.chunker,
        "bm25": {"k1": meta.k1, "b": meta.b},
    }
    return (json.dumps(payload, ensure_ascii=False) + "\n").encode("utf-8")


def _require(obj: dict, key: str, kinds, file: str, *, line: int | None = None, where: str = ""):
    name = f"{where}{key}"
    if key not in obj:
        raise InterchangeError(file, name, "missing", line=line)
    value = obj[key]
    # bool is an int in Python; no field of the format is a boolean.
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise InterchangeError(
            file, name, f"expected {_kind_name(kinds)}, found {type(value).__name__}", line=line
        )
    return value


def _kind_name(kinds) -> str:
    kinds = kinds if isinstance(kinds, tuple) else (kinds,)
    names = {str: "a string", int: "an integer", float: "a number", dict: "an object"}
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def decode_meta(data: bytes) -> Meta:
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InterchangeError(META, "(file)", f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise InterchangeError(META, "(file)", "not a JSON object")
    index_id = _require(obj, "index_id", str, META)
    created_at = _require(obj, "created_at", str, META)
    n_chunks = _require(obj, "n_chunks", int, META)
    dim = _require(obj, "dim", int, META)
    if n_chunks < 0:
        raise InterchangeError(META, "n_chunks", "negative")
    if dim <= 0:
        raise InterchangeError(META, "dim", "must be positive")
    embedding_model = _require(obj, "embedding_model", str, META)
    tokenizer = _require(obj, "tokenizer", str, META)
    chunker = _require(obj, "chunker", dict, META)
    for key in ("max_tokens", "overlap"):
        if _require(chunker, key, int, META, where="chunker.") < 0:
            raise InterchangeError(META, f"chunker.{key}", "negative")
    bm25 = _require(obj, "bm25", dict, META)
    k1 = float(_require(bm25, "k1", (int, float), META, where="bm25."))
    b = float(_require(bm25, "b", (int, float), META, where="bm25."))
    return Meta(
        index_id=index_id,
        created_at=created_at,
        n_chunks=n_chunks,
        dim=dim,
        embedding_model=embedding_model,
        tokenizer=tokenizer,
        chunker=chunker,
        k1=k1,
        b=b,
    )


# --- docs.jsonl -----------------------------------------------------------------


def encode_docs(chunks: list[Chunk]) -> bytes:
    """One JSON object per chunk, in chunk order, keys in the seed's order; every line ends in a newline."""
    lines = []
    for chunk in chunks:
        payload = {
            "chunk_id": chunk.chunk_id,
            "doc_id": chunk.doc_id,
            "source": chunk.source,
            "uri": chunk.doc_id if chunk.uri is None else chunk.uri,
            "text": chunk.text,
            "n_tokens": chunk.n_tokens,
            "fingerprint": chunk.fingerprint,
        }
        if chunk.pages is not None:
            payload["pages"] = list(chunk.pages)
        lines.append(json.dumps(payload, ensure_ascii=False) + "\n")
    return "".join(lines).encode("utf-8")


def decode_docs(data: bytes) -> list[Chunk]:
    """Parse and check docs.jsonl: chunk_id is doc_id#k with k the chunk's position in its document,
    n_tokens a count, fingerprint the SHA-256 of the text. Line numbers in errors start at 1."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InterchangeError(DOCS, "(file)", f"not UTF-8: {exc}") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    chunks: list[Chunk] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InterchangeError(DOCS, "(line)", f"malformed JSON: {exc.msg}", line=number) from None
        if not isinstance(obj, dict):
            raise InterchangeError(DOCS, "(line)", "not a JSON object", line=number)
        chunk_id = _require(obj, "chunk_id", str, DOCS, line=number)
        doc_id = _require(obj, "doc_id", str, DOCS, line=number)
        source = _require(obj, "source", str, DOCS, line=number)
        uri = _require(obj, "uri", str, DOCS, line=number)
        body = _require(obj, "text", str, DOCS, line=number)
        n_tokens = _require(obj, "n_tokens", int, DOCS, line=number)
        digest = _require(obj, "fingerprint", str, DOCS, line=number)
        if not doc_id:
            raise InterchangeError(DOCS, "doc_id", "empty", line=number)
        if n_tokens < 0:
            raise InterchangeError(DOCS, "n_tokens", "negative", line=number)
        k = seen.get(doc_id, 0)
        if chunk_id != f"{doc_id}#{k}":
            raise InterchangeError(
                DOCS,
                "chunk_id",
                f'"{chunk_id[:200]}" does not resolve: chunk {k} of document "{doc_id[:200]}" must be "{doc_id[:200]}#{k}"',
                line=number,
            )
        seen[doc_id] = k + 1
        if digest != fingerprint(body):
            raise InterchangeError(DOCS, "fingerprint", "is not the SHA-256 of the text", line=number)
        chunks.append(
            Chunk(
                doc_id=doc_id,
                k=k,
                text=body,
                n_tokens=n_tokens,
                uri=uri,
                source=source,
                pages=_pages(obj.get("pages"), number),
            )
        )
    return chunks


def _pages(value, line: int) -> tuple[int, int] | None:
    """ragsite's optional "pages" field: [first, last], whole numbers from 1 with first <= last."""
    if value is None:
        return None
    if not (
        isinstance(value, list)
        and len(value) == 2
        and all(type(v) is int for v in value)
        and 1 <= value[0] <= value[1]
    ):
        raise InterchangeError(
            DOCS, "pages", "must be [first, last]: page numbers from 1, first <= last", line=line
        )
    return value[0], value[1]


# --- vectors.f32 ----------------------------------------------------------------


def encode_vectors(vectors: np.ndarray) -> bytes:
    return np.ascontiguousarray(vectors, dtype="<f4").tobytes()


def decode_vectors(data: bytes, *, n_chunks: int, dim: int) -> np.ndarray:
    expected = n_chunks * dim * 4
    if len(data) != expected:
        raise InterchangeError(
            VECTORS,
            "size",
            f"{len(data)} bytes, but n_chunks * dim * 4 = {n_chunks} * {dim} * 4 = {expected}",
        )
    vectors = np.frombuffer(data, dtype="<f4").reshape(n_chunks, dim).astype(np.float32)
    check_unit_rows(vectors)
    return vectors


def check_unit_rows(vectors: np.ndarray) -> None:
    """Every row L2-normalised (so cosine is the dot product); names the first row that is not."""
    norms = np.linalg.norm(vectors.astype(np.float64), axis=1)
    bad = np.flatnonzero(~(np.abs(norms - 1.0) <= UNIT_TOLERANCE))  # NaN counts as bad
    if bad.size:
        row = int(bad[0])
        raise InterchangeError(VECTORS, f"row {row}", f"not unit length (norm {float(norms[row]):.6g})")


# --- bm25.idx ---------------------------------------------------------------------


def _leb128(value: int, out: bytearray) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def encode_bm25(index: BM25Index) -> bytes:
    """Seed 004's layout: header, doc_len, then each term (sorted by UTF-8 bytes) with its postings
    as (doc gap, tf) unsigned LEB128 pairs, the first gap being the document number itself."""
    out = bytearray(_HEADER.pack(MAGIC, VERSION, index.n_docs, index.n_terms, float(index.avgdl)))
    out += np.asarray(index.doc_len, dtype="<u4").tobytes()
    docs, tfs, indptr = index.postings_doc.tolist(), index.postings_tf.tolist(), index.indptr.tolist()
    encoded = [term.encode("utf-8") for term in index.vocabulary]
    # The vocabulary is already in code point order, which is UTF-8 byte order; sorting the bytes
    # again costs little and makes the file's order this function's own promise.
    order = sorted(range(len(encoded)), key=encoded.__getitem__)
    for term_id in order:
        term = encoded[term_id]
        if len(term) > 0xFFFF:
            raise InterchangeError(BM25, "term_len", f"a term of {len(term)} bytes does not fit in a u16")
        postings = bytearray()
        previous = 0
        for position in range(indptr[term_id], indptr[term_id + 1]):
            _leb128(docs[position] - previous, postings)
            _leb128(tfs[position], postings)
            previous = docs[position]
        out += _U16.pack(len(term)) + term
        out += _TERM_COUNTS.pack(indptr[term_id + 1] - indptr[term_id], len(postings))
        out += postings
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.offset = data, 0

    def take(self, size: int, what: str) -> bytes:
        end = self.offset + size
        if end > len(self.data):
            raise InterchangeError(BM25, what, f"truncated at byte {self.offset} (needs {size} more bytes)")
        chunk = self.data[self.offset : end]
        self.offset = end
        return chunk


def _read_leb128(data: bytes, offset: int, end: int, what: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if offset >= end:
            raise InterchangeError(BM25, what, "a varint runs past postings_bytes")
        byte = data[offset]
        offset += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, offset
        shift += 7
        if shift > 35:
            raise InterchangeError(BM25, what, "a varint is longer than a u32")


def decode_bm25(
    data: bytes, *, k1: float = DEFAULT_K1, b: float = DEFAULT_B, expected: BM25Index | None = None
) -> BM25Index:
    """Parse and check bm25.idx into a :class:`BM25Index` (whose avgdl is checked against the file's).

    ``expected`` is the index the texts give, when known: n_docs and doc_len are compared with it
    field by field, before avgdl, so a wrong length is named as the length and not as the mean.
    """
    reader = _Reader(data)
    magic, version, n_docs, n_terms, avgdl = _HEADER.unpack(reader.take(_HEADER.size, "header"))
    if magic != MAGIC:
        raise InterchangeError(BM25, "magic", f"expected {MAGIC!r}, found {magic!r}")
    if version != VERSION:
        raise InterchangeError(BM25, "version", f"expected {VERSION}, found {version}")
    if expected is not None and n_docs != expected.n_docs:
        raise InterchangeError(BM25, "n_docs", f"{n_docs}, but there are {expected.n_docs} chunks")
    if 4 * n_docs > len(data) - reader.offset:
        raise InterchangeError(
            BM25,
            "n_docs",
            f"{n_docs} needs {4 * n_docs} bytes of doc_len, but only {len(data) - reader.offset} follow",
        )
    doc_len = np.frombuffer(reader.take(4 * n_docs, "doc_len"), dtype="<u4").astype(np.int64)
    if expected is not None:
        differ = np.flatnonzero(doc_len != expected.doc_len)
        if differ.size:
            doc = int(differ[0])
            raise InterchangeError(
                BM25,
                f"doc_len[{doc}]",
                f"{int(doc_len[doc])}, but the text of chunk {doc} has {int(expected.doc_len[doc])} terms",
            )
    vocabulary: list[str] = []
    indptr = [0]
    postings_doc: list[int] = []
    postings_tf: list[int] = []
    previous_term = None
    for number in range(n_terms):
        (term_len,) = _U16.unpack(reader.take(2, f"term {number} term_len"))
        raw = reader.take(term_len, f"term {number} bytes")
        try:
            term = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InterchangeError(BM25, f"term {number}", "not UTF-8") from None
        if previous_term is not None and raw <= previous_term:
            raise InterchangeError(
                BM25, f"term {number}", f'"{term}" is not after the previous term in byte order'
            )
        previous_term = raw
        df, postings_bytes = _TERM_COUNTS.unpack(reader.take(8, f'term "{term}" df'))
        block = reader.take(postings_bytes, f'term "{term}" postings')
        offset, doc = 0, -1
        for _ in range(df):
            gap, offset = _read_leb128(block, offset, len(block), f'term "{term}" postings')
            tf, offset = _read_leb128(block, offset, len(block), f'term "{term}" postings')
            if doc >= 0 and gap == 0:
                raise InterchangeError(BM25, f'term "{term}" postings', "a document appears twice")
            doc = gap if doc < 0 else doc + gap
            if doc >= n_docs:
                raise InterchangeError(
                    BM25, f'term "{term}" postings', f"document {doc} is not below n_docs {n_docs}"
                )
            if tf == 0:
                raise InterchangeError(BM25, f'term "{term}" postings', "a term frequency is 0")
            postings_doc.append(doc)
            postings_tf.append(tf)
        if offset != len(block):
            raise InterchangeError(
                BM25, f'term "{term}" postings_bytes', f"{postings_bytes} bytes hold more than df={df} pairs"
            )
        vocabulary.append(term)
        indptr.append(len(postings_doc))
    if reader.offset != len(data):
        raise InterchangeError(BM25, "(file)", f"{len(data) - reader.offset} bytes after the last term")
    index = BM25Index(
        vocabulary=vocabulary,
        doc_len=doc_len,
        indptr=np.asarray(indptr),
        postings_doc=np.asarray(postings_doc),
        postings_tf=np.asarray(postings_tf),
        k1=k1,
        b=b,
    )
    if not math.isclose(avgdl, index.avgdl, rel_tol=AVGDL_RELATIVE_TOLERANCE, abs_tol=1e-12):
        raise InterchangeError(BM25, "avgdl", f"{avgdl!r} is not the mean of doc_len ({index.avgdl!r})")
    return index


# --- the whole index -------------------------------------------------------------


def encode_index(index: RagIndex) -> dict[str, bytes]:
    """The four files' bytes, by file name."""
    return {
        META: encode_meta(index.meta),
        DOCS: encode_docs(index.chunks),
        VECTORS: encode_vectors(index.vectors),
        BM25: encode_bm25(index.bm25),
    }


def build_index(
    *, meta: Meta, chunks: list[Chunk], vectors: np.ndarray, bm25: BM25Index | None = None
) -> RagIndex:
    """An index from chunks and their vectors; bm25.idx is built from the chunk texts unless `bm25`
    (postings of exactly these chunks, in order, e.g. from the build's search index) is given."""
    vectors = np.asarray(vectors, dtype=np.float32).reshape(len(chunks), meta.dim)
    if meta.n_chunks != len(chunks):
        raise InterchangeError(META, "n_chunks", f"{meta.n_chunks}, but there are {len(chunks)} chunks")
    # Write nothing a reader would refuse: every chunk_id must resolve as decode_docs checks it.
    seen: dict[str, int] = {}
    for line, item in enumerate(chunks, start=1):
        k = seen.get(item.doc_id, 0)
        if item.k != k:
            raise InterchangeError(
                DOCS, "chunk_id", f'"{item.chunk_id[:200]}" should be chunk {k} of its document', line=line
            )
        seen[item.doc_id] = k + 1
    check_unit_rows(vectors)
    if bm25 is None:
        bm25 = BM25Index.from_texts((c.text for c in chunks), k1=meta.k1, b=meta.b)
    elif bm25.n_docs != len(chunks) or (bm25.k1, bm25.b) != (meta.k1, meta.b):
        raise ValueError("the BM25 postings given are not those of these chunks")
    return RagIndex(meta=meta, chunks=chunks, vectors=vectors, bm25=bm25)


def write_index(root: Path, index: RagIndex) -> Path:
    """Write ``root/rag/<index_id>/`` and return that directory. Files are written whole, then renamed.

    A file whose bytes are already there is left alone (seed 004, ag.06: re-writing an unchanged
    index writes nothing), so its modification time says when it last changed.
    """
    target = Path(root) / "rag" / index.meta.index_id
    target.mkdir(parents=True, exist_ok=True)
    for name, data in encode_index(index).items():
        existing = target / name
        if existing.is_file() and existing.stat().st_size == len(data) and existing.read_bytes() == data:
            continue
        partial = target / f".{name}.partial"
        partial.write_bytes(data)
        partial.replace(target / name)
    return target


def read_files(directory: Path) -> dict[str, bytes]:
    files = {}
    for name in FILES:
        path = Path(directory) / name
        try:
            files[name] = path.read_bytes()
        except FileNotFoundError:
            raise InterchangeError(name, "(file)", "missing") from None
        except OSError as exc:
            raise InterchangeError(
                name, "(file)", f"unreadable ({exc.strerror or type(exc).__name__})"
            ) from None
    return files


def decode_index(files: dict[str, bytes], *, index_id: str | None = None) -> RagIndex:
    """Decode the four files and check them against each other.

    meta.json's index_id is the directory's name when given; docs.jsonl has n_chunks lines;
    vectors.f32 is n_chunks x dim; bm25.idx is exactly what the texts give.
    """
    meta = decode_meta(files[META])
    if index_id is not None and meta.index_id != index_id:
        raise InterchangeError(META, "index_id", f'"{meta.index_id}", but the directory is "{index_id}"')
    chunks = decode_docs(files[DOCS])
    if len(chunks) != meta.n_chunks:
        raise InterchangeError(
            DOCS, "(lines)", f"{len(chunks)} chunks, but meta.json says n_chunks = {meta.n_chunks}"
        )
    vectors = decode_vectors(files[VECTORS], n_chunks=meta.n_chunks, dim=meta.dim)
    rebuilt = BM25Index.from_texts((c.text for c in chunks), k1=meta.k1, b=meta.b)
    # n_chunks lines were just checked, so the texts' index has n_chunks documents.
    stored = decode_bm25(files[BM25], k1=meta.k1, b=meta.b, expected=rebuilt)
    _compare_bm25(stored, rebuilt)
    return RagIndex(meta=meta, chunks=chunks, vectors=vectors, bm25=rebuilt)


def _compare_bm25(stored: BM25Index, rebuilt: BM25Index) -> None:
    """Name the first way the file's terms differ from what the texts give (its lengths are checked on reading)."""
    if stored.vocabulary != rebuilt.vocabulary:
        missing = sorted(set(rebuilt.vocabulary) - set(stored.vocabulary))
        extra = sorted(set(stored.vocabulary) - set(rebuilt.vocabulary))
        detail = f'lacks "{missing[0]}"' if missing else f'has "{extra[0]}", which no text contains'
        raise InterchangeError(BM25, "terms", f"the vocabulary differs from the texts' terms: it {detail}")
    for term_id, term in enumerate(rebuilt.vocabulary):
        lo, hi = rebuilt.indptr[term_id], rebuilt.indptr[term_id + 1]
        slo, shi = stored.indptr[term_id], stored.indptr[term_id + 1]
        if (
            hi - lo != shi - slo
            or not np.array_equal(rebuilt.postings_doc[lo:hi], stored.postings_doc[slo:shi])
            or not np.array_equal(rebuilt.postings_tf[lo:hi], stored.postings_tf[slo:shi])
        ):
            raise InterchangeError(BM25, f'term "{term}" postings', "differ from the texts' terms")


def read_index(directory: Path, *, index_id: str | None = None) -> RagIndex:
    """Read and check ``directory`` (a ``rag/<index_id>/``); nothing is returned unless all four files agree."""
    return decode_index(read_files(directory), index_id=index_id)


__all__ = [
    "BM25",
    "DOCS",
    "FILES",
    "META",
    "VECTORS",
    "Chunk",
    "InterchangeError",
    "Meta",
    "RagIndex",
    "build_index",
    "check_unit_rows",
    "decode_bm25",
    "decode_docs",
    "decode_index",
    "decode_meta",
    "decode_vectors",
    "encode_bm25",
    "encode_docs",
    "encode_index",
    "encode_meta",
    "encode_vectors",
    "fingerprint",
    "read_files",
    "read_index",
    "write_index",
]
