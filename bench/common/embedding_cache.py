"""A disk cache of embeddings for the benchmarks, so a rerun embeds only texts it has not seen.

The local model embeds about 27 paragraphs a second on this machine's two shared cores, so a
benchmark that re-embeds SciFact (5,183 abstracts) or the known-answers corpus on every run
would take minutes each time. `install()` wraps the configured embedder: each text's vector is
kept in an SQLite file under ``data/embeddings/`` (gitignored), keyed by the model's name and
the text's SHA-256, and read back on the next run. The embedder is deterministic, so the cache
changes how long a run takes, never its figures.

Bench-only: the application never imports this.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CACHE_FILE = ROOT / "data" / "embeddings" / "cache.sqlite3"


class CachedEmbedder:
    """The wrapped embedder, with `embed_with_usage` served from the disk cache where it can be."""

    def __init__(self, embedder, path: Path = CACHE_FILE) -> None:
        self._embedder = embedder
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")
        self._lock = threading.Lock()
        self.hits = 0
        self.embedded = 0

    def __getattr__(self, name):
        return getattr(self._embedder, name)

    def _key(self, text: str) -> str:
        return hashlib.sha256(f"{self._embedder.model}\0{text}".encode()).hexdigest()

    def embed(self, texts):
        return self.embed_with_usage(texts).vectors

    def embed_with_usage(self, texts):
        from ragsite.embedders import Embedded

        keys = [self._key(t) for t in texts]
        found: dict[str, np.ndarray] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                part = keys[start : start + 500]
                marks = ",".join("?" * len(part))
                for key, blob in self._db.execute(
                    f"SELECT key, vector FROM vectors WHERE key IN ({marks})", part
                ):
                    found[key] = np.frombuffer(blob, dtype="<f4")
        missing = list(dict.fromkeys(i for i, k in enumerate(keys) if k not in found))
        tokens = 0
        if missing:
            fresh = self._embedder.embed_with_usage([texts[i] for i in missing])
            tokens = fresh.tokens or 0
            with self._lock:
                self._db.executemany(
                    "INSERT OR REPLACE INTO vectors VALUES (?, ?)",
                    [
                        (keys[i], np.asarray(v, dtype="<f4").tobytes())
                        for i, v in zip(missing, fresh.vectors, strict=True)
                    ],
                )
                self._db.commit()
            for i, vector in zip(missing, fresh.vectors, strict=True):
                found[keys[i]] = np.asarray(vector, dtype=np.float32)
        self.hits += len(texts) - len(missing)
        self.embedded += len(missing)
        vectors = (
            np.stack([found[k] for k in keys]).astype(np.float32) if texts else np.zeros((0, 0), np.float32)
        )
        return Embedded(vectors=vectors, tokens=tokens or None)


def install() -> CachedEmbedder | None:
    """Serve `ragsite.embedding.get_embedder()` through the disk cache; None for the lexical backend."""
    from ragsite import embedding

    embedder = embedding.get_embedder()
    if embedder.backend == "none":
        return None
    cached = CachedEmbedder(embedder)
    embedding.get_embedder = lambda backend=None: cached
    return cached
