"""Collections' settings access: the shared lazy settings, and where a collection's documents live.

Nothing here reads a setting at import time (see `ragsite.conf`).
"""

import os
import re
from pathlib import Path

from django.conf import settings as django_settings

from ragsite.conf import settings

__all__ = ["folder_variable", "knowledge_folder", "settings"]


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
