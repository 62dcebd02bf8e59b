"""Collections' settings access: the shared lazy settings, and where a collection's documents live.

Nothing here reads a setting at import time (see `ragsite.conf`).
"""

import os
import re
from pathlib import Path

from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from ragsite.analyzers import UnknownAnalyzer, check_name
from ragsite.conf import settings

from .limits import MAX_SYNC_MINUTES
from .text.ocr import OcrOptions

__all__ = [
    "default_analyzer",
    "folder_from_variable",
    "folder_variable",
    "variable_part",
    "variable_part_problem",
    "known_answers_gate",
    "knowledge_folder",
    "knowledge_root",
    "measured_floor_keep",
    "ocr_options",
    "scim_reader_id",
    "settings",
    "sync_every",
]


def default_analyzer() -> str:
    """ANALYZER: the analyzer a collection is created with when none is asked for (`ragsite.analyzers`)."""
    name = settings.ANALYZER
    try:
        return check_name(name)
    except UnknownAnalyzer as exc:
        raise ImproperlyConfigured(f"ANALYZER: {exc}") from None


def sync_every() -> int | None:
    """SYNC_EVERY: the minutes between folder checks a new folder collection starts with; None for 0."""
    every = int(settings.SYNC_EVERY)
    if not 0 <= every <= MAX_SYNC_MINUTES:
        raise ImproperlyConfigured(
            f"SYNC_EVERY must be 0 (off) or 1 to {MAX_SYNC_MINUTES} minutes, not {every}"
        )
    return every or None


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


_LANGUAGES = re.compile(r"^[A-Za-z_]+(\+[A-Za-z_]+)*$")
# (setting, lowest, highest): each OCR bound is a number a person may raise, within reason.
_OCR_BOUNDS = (
    ("OCR_MAX_PAGES", 1, 2000),
    ("OCR_PAGE_SECONDS", 1, 600),
    ("OCR_MAX_PIXELS", 250_000, 100_000_000),
    ("OCR_DPI", 72, 600),
)


def ocr_options() -> OcrOptions | None:
    """The OCR_* settings as the extractor's options; None when OCR_LANGUAGES is empty (OCR off)."""
    languages = (settings.OCR_LANGUAGES or "").strip()
    if not languages:
        return None
    if not _LANGUAGES.match(languages):
        raise ImproperlyConfigured(
            f"OCR_LANGUAGES must be Tesseract language names joined by +, not {languages!r}"
        )
    values = {}
    for name, lowest, highest in _OCR_BOUNDS:
        value = float(getattr(settings, name))
        if not lowest <= value <= highest:
            raise ImproperlyConfigured(f"{name} must be between {lowest} and {highest}, not {value:g}")
        values[name] = value
    return OcrOptions(
        languages=languages,
        max_pages=int(values["OCR_MAX_PAGES"]),
        page_seconds=values["OCR_PAGE_SECONDS"],
        max_pixels=int(values["OCR_MAX_PIXELS"]),
        dpi=int(values["OCR_DPI"]),
    )


def variable_part(name: str) -> str:
    """A name as it appears in a folder variable: upper-cased, every other character `_`."""
    return re.sub(r"[^A-Z0-9]", "_", name.upper())


def variable_part_problem(agent_id: str) -> str:
    """Why an agent id cannot head an agent-qualified variable ("" when it can).

    `KNOWLEDGE_<AGENT>__<COLLECTION>_FOLDER` is split at the first `__`: an agent part holding `__`, or
    ending in `_` (which runs into the separator), would let another agent's id and a collection name
    of its choosing spell the same variable (`acme` + `x--payroll` against `acme--x` + `payroll`).
    Parts that two names share (`agent-a`, `agent_a`, `Agent-A`) are refused where names are created
    (services.knowledge)."""
    part = variable_part(agent_id)
    if "__" in part or part.endswith("_"):
        return (
            f'agent id "{agent_id}" would make folder variables ambiguous ({part}): use no two '
            "'-'/'_' in a row and end with a letter or digit"
        )
    return ""


def folder_variable(collection_name: str, agent_id: str | None = None) -> str:
    """`KNOWLEDGE_<COLLECTION>_FOLDER`, or with an agent `KNOWLEDGE_<AGENT>__<COLLECTION>_FOLDER`.

    Names are uppercased with every non-alphanumeric character as `_`; one variable names one
    collection only because the names that would share one are refused (services.knowledge).
    """
    prefix = f"{variable_part(agent_id)}__" if agent_id else ""
    return f"KNOWLEDGE_{prefix}{variable_part(collection_name)}_FOLDER"


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


SCIM_READER_FIELDS = ("userName", "externalId")


def scim_reader_id(*, user_name: str, external_id: str | None) -> str:
    """SCIM_READER_ID filled in for one provisioned person: the reader id it reads as."""
    template = str(settings.SCIM_READER_ID)
    named = set(re.findall(r"{([^{}]*)}", template))
    if not named or not named <= set(SCIM_READER_FIELDS):
        raise ImproperlyConfigured(
            f"SCIM_READER_ID must name {{userName}} and/or {{externalId}} and nothing else, not {template!r}"
        )
    if "externalId" in named and not external_id:
        raise ValueError("externalId")
    return template.format(userName=user_name, externalId=external_id or "")
