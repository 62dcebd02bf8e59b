"""`make run`'s demo step: an agent with a working key, the sample handbook under KNOWLEDGE_ROOT, an admin
login."""

from io import StringIO
from pathlib import Path

import pytest
from django.contrib.auth import authenticate as log_in
from django.core.management import call_command

from collections_app.models import ApiKey, CollectionBuilt
from collections_app.services.agents import authenticate

pytestmark = pytest.mark.django_db


def demo(*args) -> tuple[str, str]:
    """(the new key, or "", read off its labelled line; all that was said)."""
    out, err = StringIO(), StringIO()
    call_command("demo", *args, stdout=out, stderr=err)
    assert out.getvalue() == ""  # everything once, labelled, on stderr
    said = err.getvalue()
    keys = [line.split("API key:")[1].split()[0] for line in said.splitlines() if "API key:" in line]
    return (keys[0] if keys else ""), said


def test_the_first_run_builds_the_handbook_and_prints_key_login_and_a_real_hint(settings, tmp_path):
    summary = tmp_path / "start" / "summary.txt"
    key, said = demo("--host", "0.0.0.0", "--port", "8101", "--summary", str(summary))
    assert said.count(key) == 2  # its labelled line, and the curl example using it
    assert authenticate(key).agent.agent_id == "demo"
    built = CollectionBuilt.objects.get(collection__name="handbook")
    assert built.passages > 0 and built.refused == []
    # The sample documents are a folder under KNOWLEDGE_ROOT, as a user's own would be.
    assert (Path(settings.KNOWLEDGE_ROOT) / "demo" / "handbook" / "handbook.md").is_file()
    assert built.collection.folder == "handbook"
    password = said.split("password (shown once): ")[1].split()[0]
    assert log_in(username="admin", password=password).is_superuser
    assert "http://127.0.0.1:8101/admin/" in said
    assert f"Bearer {key}" in said and "http://127.0.0.1:8101/api/v1/collections/handbook/search" in said
    assert settings.KNOWLEDGE_ROOT not in said  # no deployment path printed
    # The box `make run` repeats once the server answers: the login and the key, for the owner only.
    box = summary.read_text()
    assert f"password (shown once): {password}" in box and f"API key:  {key}" in box
    assert "http://127.0.0.1:8101/v1" in box and summary.stat().st_mode & 0o077 == 0


def test_a_second_run_reuses_everything_and_issues_a_key_only_when_asked():
    first_key, _ = demo()
    built = CollectionBuilt.objects.get(collection__name="handbook")
    again, said = demo("--port", "8102")
    assert again == ""  # no new key on stdout
    assert "password (shown once)" not in said and "manage.py changepassword admin" in said
    assert "1 active key(s)" in said and "NEW_KEY=1" in said and ":8102/" in said
    assert CollectionBuilt.objects.get(collection__name="handbook").built_at == built.built_at
    new_key, said = demo("--new-key")
    assert new_key and new_key != first_key
    assert authenticate(first_key) is not None and authenticate(new_key) is not None  # nothing revoked
    assert ApiKey.objects.active().filter(agent__agent_id="demo").count() == 2


def test_a_chosen_admin_user_and_password_are_used_once(settings, django_user_model):
    settings.ADMIN_USER, settings.ADMIN_PASSWORD = "root", "a chosen password"
    _key, said = demo()
    assert log_in(username="root", password="a chosen password") is not None
    assert "a chosen password" not in said and "ADMIN_PASSWORD" in said
    settings.ADMIN_PASSWORD = "another"
    demo()
    assert log_in(username="root", password="a chosen password") is not None  # an existing user is left alone
