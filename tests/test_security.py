"""No public secret: with DEBUG off the server refuses the development key, and the
production settings `check --deploy` asks for all come from the environment."""

import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest

from collections_app.checks import check_secret_key
from ragsite.security import DEVELOPMENT_KEY, secret_key_problem

ROOT = Path(__file__).resolve().parents[1]
PRODUCTION = {
    "ALLOWED_HOSTS": "rag.example.com",
    "SECURE_SSL_REDIRECT": "true",
    "SECURE_HSTS_SECONDS": "31536000",
    "SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "SECURE_HSTS_PRELOAD": "true",
    "SESSION_COOKIE_SECURE": "true",
    "CSRF_COOKIE_SECURE": "true",
    "SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO,https",
}


def _run(args, **env):
    # SECRET_KEY="" stands for "not set" even where a developer's .env holds one.
    full = {**os.environ, "DEBUG": "false", "SECRET_KEY": "", **env}
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=full, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("key", ["", DEVELOPMENT_KEY, "django-insecure-" + "x" * 60, "short-key", "a" * 60])
def test_a_missing_public_or_weak_key_is_a_problem(key):
    assert secret_key_problem(key)


def test_a_long_random_key_is_not():
    assert secret_key_problem(secrets.token_urlsafe(50)) is None


def test_the_check_refuses_the_development_key_with_debug_off_and_says_how_to_fix_it(settings):
    settings.DEBUG, settings.SECRET_KEY = False, DEVELOPMENT_KEY
    errors = check_secret_key()
    assert [e.id for e in errors] == ["ragsite.E001"]
    assert "token_urlsafe" in errors[0].hint and ".env" in errors[0].hint
    settings.DEBUG = True
    assert check_secret_key() == []


def test_manage_py_refuses_to_start_without_a_key():
    done = _run(["manage.py", "check"])
    assert done.returncode != 0 and "ragsite.E001" in done.stderr
    assert _run(["manage.py", "check"], SECRET_KEY=secrets.token_urlsafe(50)).returncode == 0


def test_the_wsgi_and_asgi_entry_points_refuse_too():
    for module in ("config.wsgi", "config.asgi"):
        done = _run(["-c", f"import {module}"])
        assert done.returncode != 0 and "refusing to start" in done.stderr, module
        assert _run(["-c", f"import {module}"], SECRET_KEY=secrets.token_urlsafe(50)).returncode == 0, module


def test_check_deploy_passes_with_the_documented_production_settings():
    done = _run(
        ["manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        SECRET_KEY=secrets.token_urlsafe(50),
        **PRODUCTION,
    )
    assert done.returncode == 0, done.stderr
    documented = (ROOT / "docs" / "security.md").read_text()
    assert all(f"{name}={value}" in documented for name, value in PRODUCTION.items())


def test_a_malformed_proxy_header_is_refused_at_start():
    done = _run(
        ["manage.py", "check"], SECRET_KEY=secrets.token_urlsafe(50), SECURE_PROXY_SSL_HEADER="X_FORWARDED"
    )
    assert done.returncode != 0 and "SECURE_PROXY_SSL_HEADER" in done.stderr
