"""Staff sign-in through a real OpenID Connect provider in Chromium: node-oidc-provider (tests/oidc/,
run with the machine's Node) on loopback, the authorization-code flow with PKCE, groups mapped to staff,
superuser and Django groups, a person outside them refused, logout ending both sessions, and a provider
that is down named on the login page while the password form still works."""

import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from django.contrib.auth import get_user_model

from .browser import log_in, messages_text

OIDC_DIR = Path(__file__).resolve().parents[1] / "oidc"
NODE = shutil.which("node")
CLIENT_ID, CLIENT_SECRET = "ragsite-admin", "a-client-secret-for-tests-only"

pytestmark = pytest.mark.browser


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def provider(live_server, settings, tmp_path):
    """The provider on loopback, and ragsite's settings pointing at it; yields its issuer URL."""
    if NODE is None or not (OIDC_DIR / "node_modules" / "oidc-provider").exists():
        pytest.skip(
            "node or tests/oidc/node_modules is missing: run `make install` (npm ci --prefix tests/oidc)"
        )
    port = _free_port()
    log = (tmp_path / "provider.log").open("w+")
    process = subprocess.Popen(
        [NODE, str(OIDC_DIR / "provider.mjs"), str(port), live_server.url, CLIENT_ID, CLIENT_SECRET],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    issuer = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            if httpx.get(f"{issuer}/.well-known/openid-configuration", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            process.kill()
            pytest.fail(f"the provider did not start:\n{(tmp_path / 'provider.log').read_text()}")
        time.sleep(0.2)
    settings.OIDC_DISCOVERY_URL = f"{issuer}/.well-known/openid-configuration"
    settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    settings.OIDC_STAFF_GROUPS = ["librarians"]
    settings.OIDC_SUPERUSER_GROUPS = ["it-admins"]
    settings.OIDC_GROUPS_MAP = {"librarians": "Librarians", "hr": "HR readers"}
    settings.OIDC_PROVIDER_NAME = "Example Corp"
    try:
        yield issuer
    finally:
        process.terminate()
        process.wait(timeout=10)


def sign_in(page, login: str):
    """From the admin's login page through the provider's own login form."""
    page.goto("/admin/login/?next=/admin/")
    page.click("#sso-button")
    page.wait_for_selector("input[name=login]")
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any-password")
    page.click("button[type=submit]")


def test_staff_sign_in_maps_groups_and_logout_ends_both_sessions(page, provider, db):
    sign_in(page, "sam")
    page.wait_for_selector("#user-tools")
    sam = get_user_model().objects.get(username=f"sam@{provider.removeprefix('http://')}")
    assert (sam.is_staff, sam.is_superuser, sam.email, sam.has_usable_password()) == (
        True,
        False,
        "sam@example.org",
        False,
    )
    assert sorted(sam.groups.values_list("name", flat=True)) == ["HR readers", "Librarians"]
    page.click("#logout-form button[type=submit]")
    # The provider's end-session page asks to confirm, then sends the browser back to ragsite's login.
    page.wait_for_selector("button[autofocus], button[type=submit]")
    page.click("button[autofocus]")
    page.wait_for_url("**/admin/login/**")
    page.goto("/admin/")
    assert "/admin/login/" in page.url  # the local session is over
    # So is the provider's: signing in again asks for the login form, not straight through.
    page.click("#sso-button")
    page.wait_for_selector("input[name=login]")
    sign_in(page, "alice")
    page.wait_for_selector("#user-tools")
    alice = get_user_model().objects.get(username__startswith="alice@")
    assert alice.is_superuser and alice.is_staff


def test_a_person_outside_the_staff_groups_is_refused_with_a_page(page, provider, db):
    sign_in(page, "olga")
    page.wait_for_selector("#sso-refused")
    assert "olga@example.org" in page.inner_text("#sso-refused")
    page.goto("/admin/")
    assert "/admin/login/" in page.url
    assert not get_user_model().objects.filter(username__startswith="olga@", is_staff=True).exists()


def test_a_provider_that_is_down_is_named_and_password_login_still_works(page, admin_user, settings, db):
    port = _free_port()  # nothing listens there
    settings.OIDC_DISCOVERY_URL = f"http://127.0.0.1:{port}/.well-known/openid-configuration"
    settings.OIDC_CLIENT_ID, settings.OIDC_CLIENT_SECRET = CLIENT_ID, CLIENT_SECRET
    settings.OIDC_PROVIDER_NAME = "Example Corp"
    page.goto("/admin/login/")
    page.click("#sso-button")
    page.wait_for_selector("ul.messagelist")
    assert "Example Corp" in messages_text(page) and "cannot be reached" in messages_text(page)
    log_in(page)
    assert "/admin/" in page.url
