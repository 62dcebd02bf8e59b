"""Readers named by the organisation's identity provider: a signed reader token instead of a name.

An agent may pass `readerToken` (the OpenID Connect ID token of the person it asks for) where it
passes `reader`. The token is verified against the provider's JWKS (from its discovery document),
its issuer, its audience (READER_TOKEN_AUDIENCES) and its expiry; the reader is then
`<sub>@<issuer host>`, holding the labels the admin's identity-provider groups give the groups its
token lists, brought up to date at each token (written only when they changed). Anything wrong with
the token is a 401 with a code saying what, never a reader. A plain `reader` keeps working unless
READER_PLAIN is off.
"""

from __future__ import annotations

import threading
import time
from urllib.parse import urlsplit

import httpx
from joserfc import jwt
from joserfc.errors import (
    BadSignatureError,
    DecodeError,
    ExpiredTokenError,
    InvalidClaimError,
    InvalidKeyIdError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import KeySet

from ragsite.errors import RagsiteError

from ...conf import settings
from ...models import IdpGroup, Reader

# Signature algorithms accepted (asymmetric only: a shared-secret token could be minted by any holder).
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
MAX_TOKEN_CHARS = 16384
# Where a GET (no body) or a client that cannot add body fields sends the token instead.
READER_TOKEN_HEADER = "Ragsite-Reader-Token"
LEEWAY_SECONDS = 60
# The provider's discovery document and keys are kept this long per process (a key it has not
# published yet is fetched at once).
CACHE_SECONDS = 300.0
_cache: dict[str, tuple[float, dict]] = {}
_cache_lock = threading.Lock()


class ReaderTokenError(RagsiteError):
    status = 401
    code = "reader_token_invalid"


def reader_named(*, reader: str | None, token: str | None) -> str | None:
    """The reader a request names: its token's reader, or its plain name where READER_PLAIN allows."""
    if token is not None and reader is not None:
        raise RagsiteError("give either reader or readerToken, not both", code="reader_and_token")
    if token is not None:
        return token_reader(token)
    if reader is not None and not settings.READER_PLAIN:
        raise ReaderTokenError(
            "this server names readers by their identity provider's token only: send readerToken",
            code="reader_token_required",
        )
    return reader


def token_reader(token: str) -> str:
    """Verify `token` and bring its reader's labels up to date; returns the reader's id."""
    claims = verify(token)
    groups = _groups(claims.get(settings.OIDC_GROUPS_CLAIM))
    external_id = f"{claims['sub']}@{urlsplit(str(claims['iss'])).netloc}"[:200]
    reader = Reader.objects.filter(external_id=external_id).first()
    if reader is not None and reader.withdrawn_at is not None:
        return external_id  # de-provisioned over SCIM: a token still valid gives it nothing
    reader = reader or Reader.objects.create(external_id=external_id)
    reader.hold_only(IdpGroup.labels_given(IdpGroup.objects.filter(name__in=groups)))
    return external_id


def verify(token: str) -> dict:
    """The token's claims once its signature, issuer, audience and times are checked."""
    if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_CHARS:
        raise ReaderTokenError("readerToken must be a signed token (a JWT) of at most 16384 characters")
    metadata = _document(_discovery_url())
    issuer = metadata.get("issuer")
    if not issuer or not metadata.get("jwks_uri"):
        raise RagsiteError("the identity provider's discovery document names no issuer or keys", status=503,
                           code="reader_token_unavailable")  # fmt: skip
    try:
        decoded = _decode(token, metadata["jwks_uri"])
        jwt.JWTClaimsRegistry(
            leeway=LEEWAY_SECONDS,
            iss={"essential": True, "value": issuer},
            aud={"essential": True, "values": _audiences()},
            exp={"essential": True},
            sub={"essential": True},
        ).validate(decoded.claims)
    except ExpiredTokenError:
        raise ReaderTokenError("the reader token has expired", code="reader_token_expired") from None
    except (InvalidClaimError, MissingClaimError) as exc:
        claim = getattr(exc, "claim", "")
        code = {"iss": "reader_token_issuer", "aud": "reader_token_audience"}.get(
            claim, "reader_token_invalid"
        )
        raise ReaderTokenError(
            f"the reader token's {claim or 'claims'} is not accepted here", code=code
        ) from None
    except (BadSignatureError, DecodeError, JoseError, ValueError):
        raise ReaderTokenError("the reader token's signature or form is not valid") from None
    return decoded.claims


def _decode(token: str, jwks_uri: str):
    keys = KeySet.import_key_set(_document(jwks_uri))
    try:
        return jwt.decode(token, keys, algorithms=ALGORITHMS)
    except InvalidKeyIdError:
        pass  # a key the provider has rotated in since the keys were fetched: fetch them once more
    return jwt.decode(token, KeySet.import_key_set(_document(jwks_uri, fresh=True)), algorithms=ALGORITHMS)


def _discovery_url() -> str:
    url = settings.READER_TOKEN_DISCOVERY_URL or settings.OIDC_DISCOVERY_URL
    if not url:
        raise RagsiteError(
            "reader tokens are not configured here (READER_TOKEN_DISCOVERY_URL)",
            code="reader_token_unsupported",
        )
    return url


def _audiences() -> list[str]:
    return list(
        settings.READER_TOKEN_AUDIENCES or ([settings.OIDC_CLIENT_ID] if settings.OIDC_CLIENT_ID else [])
    )


def _document(url: str, *, fresh: bool = False) -> dict:
    now = time.monotonic()
    with _cache_lock:
        cached = _cache.get(url)
    if cached is not None and not fresh and now - cached[0] < CACHE_SECONDS:
        return cached[1]
    try:
        response = httpx.get(url, timeout=float(settings.OIDC_TIMEOUT), follow_redirects=False)
        response.raise_for_status()
        document = response.json()
    except (httpx.HTTPError, ValueError):
        raise RagsiteError(
            "the identity provider cannot be reached to check the reader token; try again",
            code="reader_token_unavailable",
            status=503,
            headers={"Retry-After": "5"},
        ) from None
    with _cache_lock:
        _cache[url] = (now, document)
    return document


def _groups(value) -> set[str]:
    if isinstance(value, str):
        return {value}
    return {item for item in value or () if isinstance(item, str)}
