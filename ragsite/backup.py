"""What backups of several apps share (the floor: no app imported): model rows as JSON and back, and the
registry of parts an app adds to an agent's backup archive (collections_app.services.backup writes the
archive; memory_app registers its memories as a part, so collections never import memory).

Rows: bytes as base64, moments in ISO 8601, decimals as strings, the rest as stored.
"""

import base64
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal

from django.db import models
from django.utils.dateparse import parse_datetime


def row_of(instance: models.Model, *, skip: tuple[str, ...] = ()) -> dict:
    """The instance's concrete fields (foreign keys by their id column), less ``skip`` and the primary key."""
    row = {}
    for field in instance._meta.concrete_fields:
        if field.primary_key or field.name in skip or field.attname in skip:
            continue
        value = getattr(instance, field.attname)
        if isinstance(value, bytes | memoryview | bytearray):
            value = {"base64": base64.b64encode(bytes(value)).decode("ascii")}
        elif isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, Decimal):
            value = str(value)
        elif isinstance(field, models.FileField):
            value = value.name if value else ""
        row[field.attname] = value
    return row


def fields_of(model: type[models.Model], row: dict, *, skip: tuple[str, ...] = ()) -> dict:
    """Keyword arguments for ``model(...)`` from a row `row_of` wrote; unknown keys are refused by name."""
    by_column = {f.attname: f for f in model._meta.concrete_fields if not f.primary_key}
    values = {}
    for key, value in row.items():
        if key in skip:
            continue
        field = by_column.get(key)
        if field is None:
            raise ValueError(f"{model._meta.model_name} has no field {key!r}")
        if isinstance(value, dict) and set(value) == {"base64"} and isinstance(field, models.BinaryField):
            value = base64.b64decode(value["base64"])
        elif isinstance(field, models.DateTimeField) and isinstance(value, str):
            value = parse_datetime(value)
        values[key] = value
    return values


@dataclass(frozen=True)
class Part:
    """Agent data kept by an app: ``dump(agent)`` gives {member name: rows}, ``restore(agent, rows)`` writes
    them back for a (new) agent inside the restore's transaction."""

    name: str
    dump: Callable
    restore: Callable


_PARTS: dict[str, Part] = {}


def register_part(part: Part) -> None:
    """Called by an app at start-up (its AppConfig.ready)."""
    _PARTS[part.name] = part


def parts() -> dict[str, Part]:
    """The registered parts, by name."""
    return dict(_PARTS)
