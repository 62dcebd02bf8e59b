"""The configured embedder: `get_embedder()` reads `EMBED_*` and builds one per process per configuration.

Call this everywhere in the apps. `ragsite.embedders.build_embedder(...)` is the factory underneath,
for code (tests, benchmarks) that wants an embedder from explicit arguments rather than settings.
"""

from functools import lru_cache

from .conf import settings
from .embedders import Embedder, build_embedder


@lru_cache(maxsize=8)
def _embedder_for(
    backend: str,
    model_dir: str,
    url: str,
    model: str,
    api_key: str,
    timeout: float,
    batch: int,
    concurrency: int,
    cache_dir: str = "",
):
    return build_embedder(
        backend,
        model_dir=model_dir,
        url=url,
        model=model,
        api_key=api_key,
        timeout=timeout,
        batch_size=batch,
        concurrency=concurrency,
        cache_dir=cache_dir,
    )


def get_embedder(backend: str | None = None) -> Embedder:
    """The configured embedder (`EMBED_BACKEND`, or `backend` when given), built once per process."""
    return _embedder_for(
        backend or settings.EMBED_BACKEND,
        settings.EMBED_MODEL_DIR,
        settings.EMBED_URL,
        settings.EMBED_MODEL,
        settings.EMBED_API_KEY,
        float(settings.EMBED_TIMEOUT),
        int(settings.EMBED_BATCH_SIZE),
        int(settings.EMBED_CONCURRENCY),
        str(settings.EMBED_CACHE_DIR or ""),
    )


def progress_step(embedder: Embedder, total: int) -> int:
    """Texts per embedding call when a caller reports progress after each call (a build's bar).

    Over http one call is EMBED_CONCURRENCY batches sent at once. In process the model's time grows with
    the texts whatever the call size, so `total` is cut into about 20 calls of 8 to EMBED_BATCH_SIZE texts:
    one call of 186 once left a build's bar at "0 of 186 embedded" for a minute, then 100 %.
    """
    size = max(1, int(settings.EMBED_BATCH_SIZE))
    if embedder.backend == "http":
        return size * max(1, int(settings.EMBED_CONCURRENCY))
    return min(size, max(8, -(-total // 20)))
