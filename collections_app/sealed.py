"""Secrets sealed at rest: a webhook's signing secret is written to its row encrypted (Fernet), so a copy of
the database, a backup or a read-only SQL session does not hand out the keys to forge deliveries.

The keys are WEBHOOK_SECRET_KEYS, Fernet keys separated by commas: the first seals, every one opens, so
a key is rotated by putting the new one first and running `manage.py reseal_webhook_secrets`, then
dropping the old one. Left empty, one key is derived from SECRET_KEY (and one from each of
SECRET_KEY_FALLBACKS, to open what older keys sealed), so a deployment needs no new setting; a
separate key keeps the secrets apart from everything else SECRET_KEY signs.
"""

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from django.conf import settings as django_settings
from django.core.exceptions import ImproperlyConfigured

from .conf import settings

PREFIX = "fernet:"  # a sealed value; a row without it was written before secrets were sealed
_DERIVATION = b"ragsite webhook secrets\x00"


def _derived(secret_key: str) -> bytes:
    return base64.urlsafe_b64encode(hashlib.sha256(_DERIVATION + secret_key.encode()).digest())


def keys() -> list[bytes]:
    """The Fernet keys, the sealing one first."""
    configured = [k.strip() for k in (settings.WEBHOOK_SECRET_KEYS or "").split(",") if k.strip()]
    if configured:
        return [k.encode() for k in configured]
    fallbacks = getattr(django_settings, "SECRET_KEY_FALLBACKS", []) or []
    return [_derived(django_settings.SECRET_KEY), *(_derived(k) for k in fallbacks)]


def _fernet() -> MultiFernet:
    try:
        return MultiFernet([Fernet(key) for key in keys()])
    except (ValueError, TypeError):
        raise ImproperlyConfigured(
            "WEBHOOK_SECRET_KEYS must be Fernet keys (32 url-safe base64-encoded bytes) separated by commas"
        ) from None


def seal(plain: str) -> str:
    return PREFIX + _fernet().encrypt(plain.encode()).decode()


def is_sealed(value: str) -> bool:
    return value.startswith(PREFIX)


def open_sealed(value: str) -> str | None:
    """The plain secret; a value written before sealing as it is; None when no key opens it."""
    if not is_sealed(value):
        return value
    try:
        return _fernet().decrypt(value[len(PREFIX) :].encode()).decode()
    except InvalidToken:
        return None


def reseal(value: str) -> str:
    """`value` sealed with the first key (a plain one sealed, a sealed one re-encrypted); raises InvalidToken
    when no key opens it."""
    if not is_sealed(value):
        return seal(value)
    return PREFIX + _fernet().rotate(value[len(PREFIX) :].encode()).decode()
