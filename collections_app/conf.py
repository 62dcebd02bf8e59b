"""Lazy access to ragsite's settings, in one place.

Nothing here reads a setting at import time: each attribute is looked up on
`django.conf.settings` when it is used, so `override_settings` in tests and a
changed environment in a new process both take effect.
"""

import os
import re
from functools import lru_cache
from pathlib import Path

from django.conf import settings as django_settings

# The settings apps read through here. Their defaults are declared once, in ragsite/settings.py.
_NAMES = frozenset({
    "EMBED_BACKEND", "EMBED_MODEL_DIR", "EMBED_URL", "EMBED_MODEL", "EMBED_API_KEY", "EMBED_TIMEOUT",
    "EMBED_BATCH_SIZE", "JUDGE_URL", "JUDGE_MODEL", "JUDGE_API_KEY", "JUDGE_TIMEOUT", "MIN_SCORE", "AROUND",
    "MODEL_PRICES", "BUILD_HEARTBEAT_TIMEOUT", "MAX_UPLOAD_BYTES", "HEALTH_REPAIR_MINUTES",
    "IVF_MIN_PARAGRAPHS", "IVF_NPROBE", "INDEX_DIR",
})


class AppSettings:
    def __getattr__(self, name):
        if name not in _NAMES:
            raise AttributeError(name)
        return getattr(django_settings, name)


settings = AppSettings()


def folder_variable(collection_name: str) -> str:
    """`KNOWLEDGE_<NAME>_FOLDER`: the name uppercased, every non-alphanumeric character as `_`."""
    return "KNOWLEDGE_" + re.sub(r"[^A-Z0-9]", "_", collection_name.upper()) + "_FOLDER"


def knowledge_folder(collection_name: str) -> Path | None:
    """The deployment's folder for a collection, or None when none is configured.

    Read from the environment (or a Django setting of the same name) at the moment
    a build needs it. The value is a fact about one machine: callers use it to
    open files and never store, log or return it.
    """
    # settings.py loads an optional .env into the environment, so both are seen here.
    name = folder_variable(collection_name)
    value = getattr(django_settings, name, None) or os.environ.get(name)
    return Path(value) if value else None


@lru_cache(maxsize=8)
def _embedder_for(backend: str, model_dir: str, url: str, model: str, api_key: str, timeout: float, batch: int):
    from .embedders import build_embedder

    return build_embedder(
        backend, model_dir=model_dir, url=url, model=model, api_key=api_key, timeout=timeout, batch_size=batch
    )


def get_embedder(backend: str | None = None):
    """The configured embedder (`EMBED_BACKEND`), built once per process per configuration."""
    return _embedder_for(
        backend or settings.EMBED_BACKEND,
        settings.EMBED_MODEL_DIR,
        settings.EMBED_URL,
        settings.EMBED_MODEL,
        settings.EMBED_API_KEY,
        float(settings.EMBED_TIMEOUT),
        int(settings.EMBED_BATCH_SIZE),
    )
