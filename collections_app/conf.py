"""Collections' settings access: the shared lazy settings, and where a collection's documents live.

Nothing here reads a setting at import time (see `ragsite.conf`).
"""

import os
import re
from pathlib import Path

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from ragsite.conf import settings

__all__ = ["folder_variable", "known_answers_gate", "knowledge_folder", "measured_floor_keep", "settings"]


def measured_floor_keep() -> float:
    """MEASURED_FLOOR_KEEP: the share of answers a measured floor keeps, in (0, 1]."""
    keep = float(settings.MEASURED_FLOOR_KEEP)
    if not 0 < keep <= 1:
        raise ImproperlyConfigured(f"MEASURED_FLOOR_KEEP must be above 0 and at most 1, not {keep}")
    return keep


def known_answers_gate() -> int | None:
    """KNOWN_ANSWERS_GATE: how many known answers a build may lose and still go live; None = no gate."""
    gate = settings.KNOWN_ANSWERS_GATE
    if gate is None or gate == "":
        return None
    if int(gate) < 0:
        raise ImproperlyConfigured(f"KNOWN_ANSWERS_GATE must be 0 or more (or unset), not {gate}")
    return int(gate)


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
