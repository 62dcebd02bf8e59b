"""Staff sign-in through the organisation's OpenID Connect provider: the admin's login page with its
button, the redirect to the provider, the callback, and logout (ragsite.oidc does the work).

A provider that cannot be reached, or a sign-in it refuses, brings the person back to the login page
saying so; password login stays there unless PASSWORD_LOGIN is off.
"""

from __future__ import annotations

import logging

from django.contrib import admin, messages
from django.contrib.auth import login, logout
from django.http import HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from ragsite import oidc
from ragsite.conf import settings

logger = logging.getLogger("ragsite.sso")

ID_TOKEN_KEY = "sso_id_token"
NEXT_KEY = "sso_next"


def _login_page(request):
    return HttpResponseRedirect(reverse("admin:login"))


@require_http_methods(["GET", "POST"])
def admin_login(request):
    """The admin's login page with the provider's button; a password POST is refused when
    PASSWORD_LOGIN is off."""
    context = {
        "sso_enabled": oidc.enabled(),
        "sso_name": settings.OIDC_PROVIDER_NAME,
        "password_login": bool(settings.PASSWORD_LOGIN),
    }
    if request.method == "POST" and not settings.PASSWORD_LOGIN:
        messages.error(request, "Password login is turned off here: sign in with the button below.")
        return _login_page(request)
    return admin.site.login(request, extra_context=context)


@require_GET
def sso_login(request):
    if not oidc.enabled():
        messages.error(request, "Single sign-on is not configured on this server.")
        return _login_page(request)
    following = request.GET.get("next", "")
    if following and url_has_allowed_host_and_scheme(following, {request.get_host()}):
        request.session[NEXT_KEY] = following
    try:
        return oidc.client().authorize_redirect(request, request.build_absolute_uri(reverse("sso-callback")))
    except Exception as exc:  # the provider's discovery document could not be fetched or read
        logger.warning("sso: the identity provider is unreachable (%s)", type(exc).__name__)
        messages.error(request, _unreachable())
        return _login_page(request)


@require_GET
def sso_callback(request):
    from authlib.integrations.base_client import OAuthError

    try:
        token = oidc.client().authorize_access_token(request)
    except OAuthError as exc:
        logger.info("sso: sign-in refused by the provider or invalid: %s", exc.error)
        messages.error(request, f"Sign-in did not complete ({exc.error}); try again.")
        return _login_page(request)
    except Exception as exc:  # unreachable, or an ID token that failed verification
        logger.warning("sso: the sign-in could not be completed (%s)", type(exc).__name__)
        unverified = "Sign-in failed: the identity provider's answer could not be verified."
        messages.error(request, _unreachable() if isinstance(exc, OSError) else unverified)
        return _login_page(request)
    claims = dict(token.get("userinfo") or {})
    try:
        user = oidc.staff_user(claims)
    except oidc.NotStaff as exc:
        logger.info("sso: refused a sign-in outside the staff groups")
        return render(request, "sso/refused.html", {"who": exc.who}, status=403)
    login(request, user, backend="django.contrib.auth.backends.ModelBackend")
    request.session[ID_TOKEN_KEY] = token.get("id_token", "")
    following = request.session.pop(NEXT_KEY, "") or reverse("admin:index")
    return HttpResponseRedirect(following)


@require_POST
def sso_logout(request):
    """End the local session, then the provider's where it offers end-session (RP-initiated logout)."""
    id_token = request.session.get(ID_TOKEN_KEY, "")
    logout(request)
    back = request.build_absolute_uri(reverse("admin:login"))
    if not (oidc.enabled() and id_token):
        return HttpResponseRedirect(back)
    try:
        client = oidc.client()
        if client.load_server_metadata().get("end_session_endpoint"):
            return client.logout_redirect(request, post_logout_redirect_uri=back, id_token_hint=id_token)
    except Exception as exc:  # the provider is down: the local session is ended all the same
        logger.warning("sso: could not reach the provider to end its session (%s)", type(exc).__name__)
    return HttpResponseRedirect(back)


def _unreachable() -> str:
    password = " Password login still works." if settings.PASSWORD_LOGIN else ""
    return f"The sign-in service ({settings.OIDC_PROVIDER_NAME}) cannot be reached right now.{password}"
