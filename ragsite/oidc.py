"""Staff sign-in through the organisation's OpenID Connect provider (authlib), and the user it makes.

The client is built from the settings when first used (discovery URL, client id and secret, scopes):
authorization code with PKCE (S256), the ID token verified by authlib against the provider's JWKS,
issuer, audience, expiry and the nonce. `staff_user(claims)` creates or updates the Django user from
the ID token's claims: staff when one of its groups is in OIDC_STAFF_GROUPS, superuser when one is in
OIDC_SUPERUSER_GROUPS, its Django groups from OIDC_GROUPS_MAP; anybody else is `NotStaff`.

Nothing here reads a setting at import; the views that call it are in config/sso.py.
"""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import transaction

from ragsite.conf import settings

NAME = "idp"


class NotStaff(Exception):
    """The provider vouched for this person, but none of their groups may use the admin."""

    def __init__(self, who: str):
        super().__init__(who)
        self.who = who


def enabled() -> bool:
    return bool(settings.OIDC_DISCOVERY_URL)


def client():
    """The authlib client for the configured provider (one per configuration per process)."""
    return _client(
        settings.OIDC_DISCOVERY_URL,
        settings.OIDC_CLIENT_ID,
        settings.OIDC_CLIENT_SECRET,
        settings.OIDC_SCOPES,
        float(settings.OIDC_TIMEOUT),
    )


@lru_cache(maxsize=4)
def _client(discovery: str, client_id: str, secret: str, scopes: str, timeout: float):
    from authlib.integrations.django_client import OAuth

    oauth = OAuth()
    return oauth.register(
        name=NAME,
        client_id=client_id,
        client_secret=secret,
        server_metadata_url=discovery,
        client_kwargs={"scope": scopes, "code_challenge_method": "S256", "timeout": timeout},
    )


def _names(value) -> set[str]:
    if isinstance(value, str):
        return {value}
    return {str(item) for item in value or () if isinstance(item, str | int)}


def groups_of(claims: dict) -> set[str]:
    return _names(claims.get(settings.OIDC_GROUPS_CLAIM))


def username_for(claims: dict) -> str:
    """`<sub>@<issuer host>`: stable for the person at this provider, and never a local account's name
    (a password account called "admin" cannot be taken over by an IdP user who calls themself admin)."""
    host = urlsplit(str(claims.get("iss", ""))).netloc or "idp"
    return f"{claims['sub']}@{host}"[:150]


def staff_user(claims: dict):
    """The Django user for a verified ID token's claims, created or brought up to date; NotStaff when
    none of the person's groups is a staff or superuser group."""
    groups = groups_of(claims)
    superuser = bool(groups & _names(settings.OIDC_SUPERUSER_GROUPS))
    staff = superuser or bool(groups & _names(settings.OIDC_STAFF_GROUPS))
    username = username_for(claims)
    User = get_user_model()
    if not staff:
        # Someone who lost the group since their last sign-in loses the admin at once.
        User.objects.filter(username=username).update(is_staff=False, is_superuser=False)
        raise NotStaff(str(claims.get("email") or claims.get("preferred_username") or claims["sub"]))
    mapping = dict(settings.OIDC_GROUPS_MAP or {})
    wanted = sorted({mapping[g] for g in groups if g in mapping})
    with transaction.atomic():
        user, created = User.objects.get_or_create(username=username)
        if created:
            user.set_unusable_password()  # signs in through the provider only
        user.email = str(claims.get("email") or "")[:254]
        full = str(claims.get("name") or "")
        user.first_name, _, user.last_name = (part[:150] for part in full.partition(" "))
        user.is_staff, user.is_superuser, user.is_active = True, superuser, True
        user.save()
        user.groups.set([Group.objects.get_or_create(name=name[:150])[0] for name in wanted])
    return user
