"""Staff sign-in without a browser: the login page with and without SSO and password login, a callback
that did not start here, and the claims → user mapping (test_sso_browser.py runs the whole flow)."""

import pytest
from django.contrib.auth import get_user_model

from ragsite import oidc

ISSUER = "https://idp.example.org"


@pytest.fixture
def sso(settings):
    settings.OIDC_DISCOVERY_URL = f"{ISSUER}/.well-known/openid-configuration"
    settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET = "ragsite", "secret"
    settings.OIDC_STAFF_GROUPS, settings.OIDC_SUPERUSER_GROUPS = ["librarians"], ["it-admins"]
    settings.OIDC_GROUPS_MAP = {"librarians": "Librarians"}
    return settings


def claims(sub="sam", groups=("librarians",), **extra) -> dict:
    return {
        "iss": ISSUER,
        "sub": sub,
        "email": f"{sub}@example.org",
        "name": "Sam Staff",
        "groups": list(groups),
        **extra,
    }


def test_the_login_page_offers_sso_only_when_configured(client, sso, db):
    page = client.get("/admin/login/").content.decode()
    assert 'id="sso-button"' in page and 'id="login-form"' in page
    sso.OIDC_DISCOVERY_URL = ""
    page = client.get("/admin/login/").content.decode()
    assert 'id="sso-button"' not in page and 'id="login-form"' in page


def test_password_login_can_be_turned_off(client, sso, admin_user):
    sso.PASSWORD_LOGIN = False
    page = client.get("/admin/login/").content.decode()
    assert 'id="login-form"' not in page and 'id="sso-button"' in page
    refused = client.post("/admin/login/", {"username": "admin", "password": "password"}, follow=True)
    assert "Password login is turned off" in refused.content.decode()
    assert client.get("/admin/").status_code == 302  # still not logged in
    sso.PASSWORD_LOGIN = True
    client.post("/admin/login/", {"username": "admin", "password": "password"})
    assert client.get("/admin/").status_code == 200


def test_a_callback_that_did_not_start_here_signs_nobody_in(client, sso, db):
    answer = client.get("/sso/callback?code=forged&state=never-issued", follow=True)
    assert "Sign-in did not complete" in answer.content.decode()
    assert client.get("/admin/").status_code == 302
    assert get_user_model().objects.count() == 0


def test_claims_make_a_staff_user_update_it_and_unmake_it(sso, db):
    user = oidc.staff_user(claims())
    assert (user.username, user.is_staff, user.is_superuser) == ("sam@idp.example.org", True, False)
    assert list(user.groups.values_list("name", flat=True)) == ["Librarians"]
    assert not user.has_usable_password()
    promoted = oidc.staff_user(claims(groups=["it-admins"]))
    assert promoted.pk == user.pk and promoted.is_superuser and list(promoted.groups.all()) == []
    with pytest.raises(oidc.NotStaff):
        oidc.staff_user(claims(groups=["sales"]))
    user.refresh_from_db()
    assert (user.is_staff, user.is_superuser) == (False, False)  # out of the groups: out of the admin


def test_an_idp_user_cannot_take_over_a_local_account_of_the_same_name(sso, admin_user):
    taken = oidc.staff_user(claims(sub="admin", groups=["librarians"]))
    admin_user.refresh_from_db()
    assert taken.pk != admin_user.pk and admin_user.is_superuser and admin_user.check_password("password")
