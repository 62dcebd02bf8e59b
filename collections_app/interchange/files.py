"""The interchange format's records, its error and three of its files: meta.json, docs.jsonl, vectors.f32."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

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
                f'"{chunk_id[:200]}" does not resolve: chunk {k} of document "{doc_id[:200]}" must be '
                f'"{doc_id[:200]}#{k}"',
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
