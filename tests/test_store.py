"""The store: SQLite in WAL mode, and the schema guard that refuses a newer store."""

import pytest
from django.core.management import call_command
from django.db import connection

from collections_app.checks import check_store_schema
from collections_app.models import SCHEMA_VERSION, StoreMeta
from collections_app.store import StoreSchemaError, ensure_supported, read_schema_version


@pytest.mark.django_db
def test_sqlite_store_runs_in_wal_mode_with_immediate_transactions():
    if connection.vendor != "sqlite":
        pytest.skip("WAL is SQLite's")
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0] == "wal"
        cursor.execute("PRAGMA busy_timeout")
        assert cursor.fetchone()[0] >= 5000
    assert connection.settings_dict["OPTIONS"]["transaction_mode"] == "IMMEDIATE"


def test_a_new_sqlite_store_takes_32_kb_pages_and_an_old_one_keeps_its_own(tmp_path, django_db_blocker):
    """A paragraph row is ~2.4 KB: on 4 KB pages each held one row (docs/decisions/0002)."""
    import sqlite3

    from django.db.backends.sqlite3.base import DatabaseWrapper

    if connection.vendor != "sqlite":
        pytest.skip("page sizes are SQLite's")
    old = tmp_path / "old.sqlite3"
    with sqlite3.connect(old) as plain:  # a store made before: 4 KB pages, already in WAL
        plain.execute("PRAGMA journal_mode=WAL")
        plain.execute("CREATE TABLE t (x)")
    sizes = {}
    for name in ("new.sqlite3", "old.sqlite3"):
        store = DatabaseWrapper({**connection.settings_dict, "NAME": str(tmp_path / name)}, alias=name)
        with django_db_blocker.unblock():
            with store.cursor() as cursor:
                cursor.execute("CREATE TABLE IF NOT EXISTS t (x)")
                cursor.execute("INSERT INTO t VALUES (1)")
                cursor.execute("PRAGMA page_size")
                sizes[name] = cursor.fetchone()[0]
                cursor.execute("PRAGMA journal_mode")
                assert cursor.fetchone()[0] == "wal"
            store.close()
    assert sizes == {"new.sqlite3": 32768, "old.sqlite3": 4096}


@pytest.mark.django_db
def test_migrations_record_the_schema_version():
    assert read_schema_version(connection) == SCHEMA_VERSION
    assert StoreMeta.objects.get(key="schema_version").value == str(SCHEMA_VERSION)


def test_a_store_from_a_newer_ragsite_is_refused_on_open_and_closed(tmp_path, django_db_blocker):
    from django.db.backends.sqlite3.base import DatabaseWrapper

    store = DatabaseWrapper(
        {
            **connection.settings_dict,
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(tmp_path / "newer.sqlite3"),
            "OPTIONS": {},
        },
        alias="scratch",
    )
    with django_db_blocker.unblock():
        with store.cursor() as cursor:
            cursor.execute("CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT)")
            cursor.execute("INSERT INTO store_meta VALUES ('schema_version', %s)", [str(SCHEMA_VERSION + 1)])
        with pytest.raises(StoreSchemaError, match="newer ragsite.*Upgrade ragsite"):
            ensure_supported(store)
    assert store.connection is None  # closed before raising, so the file can be moved aside


def test_a_store_with_no_schema_yet_is_not_refused(tmp_path, django_db_blocker):
    from django.db.backends.sqlite3.base import DatabaseWrapper

    store = DatabaseWrapper(
        {
            **connection.settings_dict,
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(tmp_path / "new.sqlite3"),
            "OPTIONS": {},
        },
        alias="fresh",
    )
    with django_db_blocker.unblock():
        ensure_supported(store)
        assert read_schema_version(store) is None
        store.close()


@pytest.mark.django_db
def test_a_store_from_a_newer_ragsite_fails_the_system_check():
    StoreMeta.objects.filter(key="schema_version").update(value=str(SCHEMA_VERSION + 1))
    errors = check_store_schema(databases=["default"])
    assert [e.id for e in errors] == ["collections.E001"]
    assert "Upgrade ragsite" in errors[0].msg and errors[0].hint


@pytest.mark.django_db
def test_the_current_store_passes_the_system_check():
    assert check_store_schema(databases=["default"]) == []
    call_command("check", databases=["default"])


def scratch_store(tmp_path, alias, *, version=None, migrated=True):
    """A SQLite store with a store_meta table holding `version` (None: no row), as another ragsite left it."""
    from django.db.backends.sqlite3.base import DatabaseWrapper

    store = DatabaseWrapper(
        {
            **connection.settings_dict,
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": str(tmp_path / f"{alias}.sqlite3"),
            "OPTIONS": {},
        },
        alias=alias,
    )
    with store.cursor() as cursor:
        cursor.execute("CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT)")
        cursor.execute(
            "CREATE TABLE django_migrations (id INTEGER PRIMARY KEY, app TEXT, name TEXT, applied TEXT)"
        )
        if migrated:
            cursor.execute(
                "INSERT INTO django_migrations (app, name, applied) VALUES "
                "('collections_app', '0002_schema_version', '2026-12-01')"
            )
        if version is not None:
            cursor.execute("INSERT INTO store_meta VALUES ('schema_version', %s)", [version])
    return store


@pytest.mark.parametrize("version", ["abc", "", "1.5", "2026-10-22", "NaN"])
def test_seed_refusal_1_a_schema_version_that_is_not_a_number_is_refused_and_the_store_closed(
    version, tmp_path, django_db_blocker
):
    """Seed 000, refusal 1: "A schema it does not know. Refused, never guessed", and "the refusal closes
    the file before throwing" - for a version that cannot be read as for a newer one."""
    with django_db_blocker.unblock():
        store = scratch_store(tmp_path, "garbled", version=version)
        with pytest.raises(StoreSchemaError, match="not a version this code knows.*Upgrade ragsite"):
            ensure_supported(store)
    assert store.connection is None


def test_seed_refusal_1_a_migrated_store_that_records_no_version_is_refused(tmp_path, django_db_blocker):
    with django_db_blocker.unblock():
        store = scratch_store(tmp_path, "unrecorded")
        with pytest.raises(StoreSchemaError, match="records no schema version"):
            ensure_supported(store)
        assert store.connection is None
        # Before the migration that records it has run, the store is being migrated, not unknown.
        midway = scratch_store(tmp_path, "midway", migrated=False)
        ensure_supported(midway)
        midway.close()


@pytest.mark.django_db
@pytest.mark.parametrize("value", [str(SCHEMA_VERSION + 1), "abc"])
def test_seed_refusal_1_plain_check_without_a_database_reports_collections_e001(value):
    from django.core import checks

    StoreMeta.objects.filter(key="schema_version").update(value=value)
    assert "collections.E001" in [e.id for e in checks.run_checks()]
    assert "collections.E001" in [e.id for e in checks.run_checks(databases=["default"])]
    StoreMeta.objects.filter(key="schema_version").update(value=str(SCHEMA_VERSION))
    assert "collections.E001" not in [e.id for e in checks.run_checks()]


@pytest.mark.slow
def test_manage_py_commands_print_the_refusal_and_exit_non_zero_without_a_traceback(tmp_path):
    """What an operator sees: one sentence, a non-zero exit, never a traceback, whichever command met the
    store first (a system check, or the guard while connecting)."""
    import os
    import sqlite3
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'store.sqlite3'}",
        "DATA_DIR": str(tmp_path),
        "EMBED_BACKEND": "none",
    }
    env.pop("PYTEST_ADDOPTS", None)

    def manage(*args):
        return subprocess.run(
            [sys.executable, "manage.py", *args],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert manage("migrate", "-v0").returncode == 0
    commands = (["check"], ["check", "--database", "default"], ["migrate"], ["search", "alpha", "h", "q"])
    for value, sentence, tried in [
        (str(SCHEMA_VERSION + 1), "written by a newer ragsite", commands),
        ("abc", 'records schema version "abc"', commands[:3:2]),
    ]:
        with sqlite3.connect(tmp_path / "store.sqlite3") as db:
            db.execute("UPDATE store_meta SET value = ? WHERE key = 'schema_version'", [value])
        for args in tried:
            done = manage(*args)
            assert done.returncode != 0, (args, done.stdout)
            assert sentence in done.stderr and "Traceback" not in done.stderr, (args, done.stderr)


@pytest.mark.django_db(transaction=True)
def test_a_flushed_store_records_its_version_again_so_the_next_open_is_not_refused():
    # `flush` (which every transactional test runs) empties store_meta and then emits post_migrate.
    call_command("flush", interactive=False, verbosity=0)
    assert StoreMeta.objects.get(key="schema_version").value == str(SCHEMA_VERSION)
    ensure_supported(connection)


@pytest.mark.django_db
def test_migrate_never_overwrites_the_version_a_store_records():
    StoreMeta.objects.filter(key="schema_version").update(value=str(SCHEMA_VERSION + 1))
    from collections_app.signals import record_schema_version

    record_schema_version(sender=None, using="default")
    assert StoreMeta.objects.get(key="schema_version").value == str(SCHEMA_VERSION + 1)
