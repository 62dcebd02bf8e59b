"""Credentials in a backup archive, only when the operator asks: sealed with a Fernet key the operator gives
(never the server's own WEBHOOK_SECRET_KEYS, so an archive opens on another server and a copy of a server's
settings does not open its archives). Pure: no models, no settings.

A sealed credential is `{"fernet": "<token>"}` in its row; the manifest says `"credentials": "fernet"`.
"""

from cryptography.fernet import Fernet, InvalidToken

SEALED = "fernet"


class CredentialsError(Exception):
    """The key is not a Fernet key, or it does not open the archive's credentials; the message says which."""


def _fernet(key: str | bytes) -> Fernet:
    try:
        return Fernet(key.strip() if isinstance(key, bytes) else key.strip().encode())
    except (ValueError, TypeError):
        raise CredentialsError(
            "the credentials key must be a Fernet key (32 url-safe base64-encoded bytes), as `python -c "
            "'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'` prints"
        ) from None


def seal_credential(key: str | bytes, plain: str) -> dict:
    return {SEALED: _fernet(key).encrypt(plain.encode()).decode("ascii")}


def open_credential(key: str | bytes, sealed: dict, *, where: str) -> str:
    """The plain credential; `CredentialsError` naming `where` when the key does not open it."""
    if not isinstance(sealed, dict) or not isinstance(sealed.get(SEALED), str):
        raise CredentialsError(f"{where}: not a sealed credential")
    try:
        return _fernet(key).decrypt(sealed[SEALED].encode()).decode()
    except InvalidToken:
        raise CredentialsError(
            f"{where}: the credentials key does not open it (another key sealed it?)"
        ) from None
