"""A BERT encoder forward pass in numpy: weights from safetensors, attention, GELU, mean pooling."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import layout_cache
from .base import EmbeddingError, normalise_rows

logger = logging.getLogger("ragsite.embedders")


@dataclass(frozen=True)
class Layer:
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
class Bert:
    word: np.ndarray  # (vocab, hidden)
    position: np.ndarray  # (positions, hidden), with the token-type-0 embedding already added
    norm_g: np.ndarray
    norm_b: np.ndarray
    layers: tuple[Layer, ...]
    heads: int
    eps: float


def load_bert(path: Path, heads: int, eps: float, cache_dir: Path | None = None) -> Bert:
    """Read safetensors weights and lay them out for row-major matmuls (x @ W).

    With `cache_dir`, the laid-out weights are mapped read-only from a file there (written by the
    first process to load this model), so that every worker shares one copy; see `layout_cache`.
    A folder that cannot be written falls back to a private layout, with one warning per process.
    """
    if cache_dir is not None:
        try:
            arrays = layout_cache.load_or_build(cache_dir, path, heads, lambda: lay_out(path, heads))
        except layout_cache.CacheUnavailable as exc:
            _warn_once(
                f"the embedding weights cache folder cannot be used ({exc}); each process keeps "
                "its own copy of the model weights"
            )
        except OSError as exc:  # the model file itself cannot be read for its key
            raise EmbeddingError(
                f"the local model weights could not be read ({type(exc).__name__})"
            ) from None
        else:
            return assemble(arrays, heads, eps)
    return assemble(lay_out(path, heads), heads, eps)


_warned = False


def _warn_once(message: str) -> None:
    global _warned
    if not _warned:
        _warned = True
        logger.warning(message)


def lay_out(path: Path, heads: int) -> dict[str, np.ndarray]:
    """The safetensors weights as the flat, named float32 arrays that `assemble` turns into a Bert."""
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
    out = {
        "word": get("embeddings.word_embeddings.weight"),
        # the token-type-0 embedding is added once here rather than to every token
        "position": get("embeddings.position_embeddings.weight")
        + get("embeddings.token_type_embeddings.weight")[0],
        "norm_g": get("embeddings.LayerNorm.weight"),
        "norm_b": get("embeddings.LayerNorm.bias"),
    }
    index = 0
    while f"encoder.layer.{index}.attention.self.query.weight" in raw:
        p, q = f"encoder.layer.{index}.", f"{index}."
        # torch Linear stores (out, in); transposing once here makes every product a plain x @ W.
        query_w = get(p + "attention.self.query.weight").T * scale
        query_b = get(p + "attention.self.query.bias") * scale
        out[q + "qkv_w"] = np.concatenate(
            [query_w, get(p + "attention.self.key.weight").T, get(p + "attention.self.value.weight").T],
            axis=1,
        )
        out[q + "qkv_b"] = np.concatenate(
            [query_b, get(p + "attention.self.key.bias"), get(p + "attention.self.value.bias")]
        )
        out[q + "out_w"] = get(p + "attention.output.dense.weight").T
        out[q + "out_b"] = get(p + "attention.output.dense.bias")
        out[q + "norm1_g"] = get(p + "attention.output.LayerNorm.weight")
        out[q + "norm1_b"] = get(p + "attention.output.LayerNorm.bias")
        out[q + "up_w"] = get(p + "intermediate.dense.weight").T
        out[q + "up_b"] = get(p + "intermediate.dense.bias")
        out[q + "down_w"] = get(p + "output.dense.weight").T
        out[q + "down_b"] = get(p + "output.dense.bias")
        out[q + "norm2_g"] = get(p + "output.LayerNorm.weight")
        out[q + "norm2_b"] = get(p + "output.LayerNorm.bias")
        index += 1
    if not index:
        raise EmbeddingError("the local model weights hold no encoder layers")
    return {name: np.ascontiguousarray(array) for name, array in out.items()}


def assemble(arrays: dict[str, np.ndarray], heads: int, eps: float) -> Bert:
    """A Bert over the arrays of `lay_out` (private, or mapped from the cache), without copying them."""
    layers = []
    while f"{len(layers)}.qkv_w" in arrays:
        q = f"{len(layers)}."
        layers.append(Layer(**{field: arrays[q + field] for field in Layer.__dataclass_fields__}))
    return Bert(
        word=arrays["word"],
        position=arrays["position"],
        norm_g=arrays["norm_g"],
        norm_b=arrays["norm_b"],
        layers=tuple(layers),
        heads=heads,
        eps=eps,
    )


def layer_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray, eps: float) -> None:
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


def gelu(x: np.ndarray) -> None:
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


# Below this, a row's softmax denominator is near float32's smallest normal numbers; see `attend`.
_SMALLEST_TOTAL = 1e-25


def attend(qkv: np.ndarray, out: np.ndarray, heads: int) -> None:
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


def forward(bert: Bert, ids: np.ndarray, lengths: np.ndarray) -> np.ndarray:
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
    layer_norm(x, bert.norm_g, bert.norm_b, bert.eps)

    total = x.shape[0]
    context = np.empty_like(x)
    spans = list(zip(starts.tolist(), lengths.tolist(), strict=True))
    for layer in bert.layers:
        qkv = x @ layer.qkv_w
        qkv += layer.qkv_b
        for start, length in spans:
            attend(qkv[start : start + length], context[start : start + length], bert.heads)
        attended = context @ layer.out_w
        attended += layer.out_b
        attended += x
        layer_norm(attended, layer.norm1_g, layer.norm1_b, bert.eps)
        x = attended

        inner = x @ layer.up_w
        for row in range(0, total, _GELU_ROWS):
            block = inner[row : row + _GELU_ROWS]
            block += layer.up_b
            gelu(block)
        out = inner @ layer.down_w
        out += layer.down_b
        out += x
        layer_norm(out, layer.norm2_g, layer.norm2_b, bert.eps)
        x = out

    pooled = np.add.reduceat(x, starts, axis=0)
    pooled /= lengths[:, None].astype(np.float32)
    return normalise_rows(pooled)
