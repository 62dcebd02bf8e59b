"""A model field of the store's own: a SHA-256 digest kept as its 32 bytes, handled as its hex.

A paragraph's text fingerprint is seed 004's "sha256 of text", spelled in docs.jsonl as 64 lowercase
hex characters. Stored as those characters it took 65 bytes of every paragraph row; as the digest's
bytes it takes 33 (docs/decisions/0002). Only the row changes: Python reads and writes the hex, so
lookups (`fingerprint=hex`), the admin and the exports see exactly what they saw before, and no code
above the store converts.
"""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.db import models

DIGEST_BYTES = 32
_HEX = re.compile(r"[0-9a-f]{64}")


def digest_bytes(value: str) -> bytes:
    """The 32 bytes of a fingerprint given as 64 lowercase hex characters; anything else is refused."""
    if not isinstance(value, str) or not _HEX.fullmatch(value):
        shown = f"{len(value)} characters" if isinstance(value, str) else type(value).__name__
        raise ValidationError(
            f"a fingerprint is a SHA-256 digest as 64 lowercase hex characters, not {shown}", code="invalid"
        )
    return bytes.fromhex(value)


class DigestField(models.BinaryField):
    """SHA-256 digests: 32 bytes in the row (BLOB on SQLite, bytea on PostgreSQL), hex in Python."""

    description = "SHA-256 digest (stored as its 32 bytes, read and written as hex)"

    def from_db_value(self, value, expression, connection):
        return None if value is None else bytes(value).hex()

    def to_python(self, value):
        if value is None or isinstance(value, str):
            return value
        return bytes(value).hex()

    def get_prep_value(self, value):
        value = super().get_prep_value(value)
        if value is None:
            return None
        if isinstance(value, (bytes, bytearray, memoryview)):
            if len(value) != DIGEST_BYTES:
                raise ValidationError(
                    f"a SHA-256 digest is {DIGEST_BYTES} bytes, not {len(value)}", code="invalid"
                )
            return bytes(value)
        return digest_bytes(value)

    def value_to_string(self, obj):
        # Serialised (dumpdata) as the hex, the digest's one spelling everywhere outside the row.
        return self.value_from_object(obj)


class SealedSecretField(models.CharField):
    """A secret kept encrypted in its row (`collections_app.sealed`), plain in Python.

    Reading a value no configured key opens gives "" (the hook then fails its deliveries saying so)
    rather than an error on every page that lists hooks."""

    description = "a secret, encrypted at rest"

    def from_db_value(self, value, expression, connection):
        from .sealed import open_sealed

        if value is None:
            return None
        opened = open_sealed(value)
        return "" if opened is None else opened

    def get_prep_value(self, value):
        from .sealed import is_sealed, seal

        value = super().get_prep_value(value)
        if value is None or value == "" or is_sealed(value):
            return value
        return seal(value)
