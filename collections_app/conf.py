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
    "IVF_MIN_PARAGRAPHS", "IVF_NPROBE", "KNOWLEDGE_ROOT", "BUILD_STALE_SECONDS",
    "ADMIN_USER", "ADMIN_PASSWORD",
})


class AppSettings:
    def __getattr__(self, name):
        if name not in _NAMES:
            raise AttributeError(name)
        return getattr(django_settings, name)


settings = AppSettings()


def _variable_part(name: str) -> str:
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


def folder_variable(collection_name: str, agent_id: str | None = None) -> str:
    """`KNOWLEDGE_<COLLECTION>_FOLDER`, or with an agent `KNOWLEDGE_<AGENT>__<COLLECTION>_FOLDER`.

    Names are uppercased with every non-alphanumeric character as `_`.
    """
    prefix = f"{_variable_part(agent_id)}__" if agent_id else ""
    return f"KNOWLEDGE_{prefix}{_variable_part(collection_name)}_FOLDER"


def folder_from_variable(variable: str) -> Path | None:
    """The folder a `KNOWLEDGE_..._FOLDER` variable names, or None when it is unset.

    Read from the environment (or a Django setting of the same name) at the moment
    a build needs it. The value is a fact about one machine: callers use it to
    open files and never store, log or return it.
    """
    # settings.py loads an optional .env into the environment, so both are seen here.
    value = getattr(django_settings, variable, None) or os.environ.get(variable)
    return Path(value) if value else None


def knowledge_folder(collection_name: str) -> Path | None:
    """The folder `KNOWLEDGE_<COLLECTION>_FOLDER` names, or None (see services.sources for precedence)."""
    return folder_from_variable(folder_variable(collection_name))


def knowledge_root() -> Path | None:
    """`KNOWLEDGE_ROOT`: one folder per agent, whose sub-folders are that agent's sources; None when unset."""
    value = settings.KNOWLEDGE_ROOT
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
