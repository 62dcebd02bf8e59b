"""Embedding backends: turn texts into L2-normalised float32 vectors, and count model tokens.

A pure package: it imports neither Django models nor settings. `ragsite.embedding.get_embedder()`
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

Layout: `base` (the interface), `local` and `bert` (the in-process model), `http` (a remote endpoint),
`simple` (`none` and the testing backend `hash`). `build_embedder(...)` makes one from explicit
arguments; inside the apps, call `ragsite.embedding.get_embedder()`, which reads the settings and
caches the result per process.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from .base import BACKENDS, DEFAULT_LOCAL_MODEL, Embedded, Embedder, EmbeddingError
from .http import HttpEmbedder
from .local import LocalEmbedder, default_model_dir
from .simple import HashEmbedder, NoneEmbedder

__all__ = [
    "BACKENDS",
    "DEFAULT_LOCAL_MODEL",
    "Embedded",
    "Embedder",
    "EmbeddingError",
    "HashEmbedder",
    "HttpEmbedder",
    "LocalEmbedder",
    "NoneEmbedder",
    "build_embedder",
    "default_model_dir",
]


def build_embedder(
    backend: str,
    *,
    model_dir: str = "",
    url: str = "",
    model: str = "",
    api_key: str = "",
    timeout: float = 30.0,
    batch_size: int = 64,
    concurrency: int = 1,
    cache_dir: str = "",
) -> Embedder:
    """The embedder for `backend` ("local", "http", "none", or the testing backend "hash").

    `url`, `model` and `api_key` are for http only; `model_dir` and `cache_dir` (where the
    laid-out weights are shared between processes; empty keeps them private) for local only. Raises
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
    if concurrency < 1:
        raise ImproperlyConfigured("the embedding concurrency (EMBED_CONCURRENCY) must be at least 1")
    if name == "none":
        return NoneEmbedder()
    if name == "hash":
        return HashEmbedder()
    if name == "local":
        # EMBED_MODEL names the remote model; the local model is named by its own folder, so a
        # value left over from an http setup cannot mislabel what the local model built.
        return LocalEmbedder(model_dir or None, batch_size=batch_size, cache_dir=cache_dir or None)
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
    return HttpEmbedder(
        url,
        model=model.strip(),
        api_key=api_key,
        timeout=timeout,
        batch_size=batch_size,
        concurrency=concurrency,
    )
