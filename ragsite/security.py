"""What a deployment must not run with: the public development signing key.

django-q2 signs the pickled tasks it puts on the broker with `SECRET_KEY`, so a key
anybody can read (the development default, or a short one) lets whoever can write to
the broker run code in the workers. With `DEBUG` off the server refuses to start
with such a key: a system check (`ragsite.E001`, run by `runserver`, `migrate`,
`qcluster` and `check`) and the WSGI/ASGI entry points, which run no checks.
"""

import hashlib
import hmac

from django.core.exceptions import ImproperlyConfigured

# The key settings.py falls back to when none is set; public, so only ever for DEBUG.
DEVELOPMENT_KEY = "ragsite-insecure-development-key-change-me"
MIN_KEY_LENGTH = 50
MIN_UNIQUE_CHARACTERS = 5
FIX = (
    "Set SECRET_KEY in the environment or in .env to a long random value, e.g. the output of "
    "`python -c 'import secrets; print(secrets.token_urlsafe(50))'` (`make run` writes one into .env)."
)


def secret_key_problem(key: str | None) -> str | None:
    """Why `key` must not sign anything in production, or None when it will do.

    The length and variety rules are Django's own (`security.W009`)."""
    if not key:
        return "SECRET_KEY is not set"
    if key == DEVELOPMENT_KEY or key.startswith("django-insecure"):
        return "SECRET_KEY is the public development key"
    if len(key) < MIN_KEY_LENGTH or len(set(key)) < MIN_UNIQUE_CHARACTERS:
        return (
            f"SECRET_KEY is too short or too plain (at least {MIN_KEY_LENGTH} characters, "
            f"{MIN_UNIQUE_CHARACTERS} different)"
        )
    return None


def insecure_start_reason(settings) -> str | None:
    """The reason this process must not serve, given Django's settings; None when it may."""
    if settings.DEBUG:
        return None
    return secret_key_problem(settings.SECRET_KEY)


def refuse_insecure_start() -> None:
    """Called by the WSGI and ASGI entry points, which run no system checks of their own."""
    from django.conf import settings

    reason = insecure_start_reason(settings)
    if reason:
        raise ImproperlyConfigured(f"{reason} and DEBUG is off; refusing to start. {FIX}")


def bearer_matches(authorization: str, token: str) -> bool:
    """Whether an `Authorization` header carries `Bearer <token>`, compared in constant time. Both sides
    are hashed first: `hmac.compare_digest` alone returns at once when the lengths differ, which tells a
    prober the token's length."""
    given = hashlib.sha256(authorization.encode("utf-8", "surrogatepass")).digest()
    return hmac.compare_digest(given, hashlib.sha256(f"Bearer {token}".encode()).digest())
