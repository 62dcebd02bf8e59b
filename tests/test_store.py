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


@pytest.mark.django_db
def test_migrations_record_the_schema_version():
    assert read_schema_version(connection) == SCHEMA_VERSION
    assert StoreMeta.objects.get(key="schema_version").value == str(SCHEMA_VERSION)


def test_a_store_from_a_newer_ragsite_is_refused_on_open_and_closed(tmp_path, django_db_blocker):
    from django.db.backends.sqlite3.base import DatabaseWrapper

    store = DatabaseWrapper({**connection.settings_dict, "ENGINE": "django.db.backends.sqlite3",
                             "NAME": str(tmp_path / "newer.sqlite3"), "OPTIONS": {}}, alias="scratch")
    with django_db_blocker.unblock():
        with store.cursor() as cursor:
            cursor.execute("CREATE TABLE store_meta (key TEXT PRIMARY KEY, value TEXT)")
            cursor.execute("INSERT INTO store_meta VALUES ('schema_version', %s)", [str(SCHEMA_VERSION + 1)])
        with pytest.raises(StoreSchemaError, match="newer ragsite.*Upgrade ragsite"):
            ensure_supported(store)
    assert store.connection is None  # closed before raising, so the file can be moved aside


def test_a_store_with_no_schema_yet_is_not_refused(tmp_path, django_db_blocker):
    from django.db.backends.sqlite3.base import DatabaseWrapper

    store = DatabaseWrapper({**connection.settings_dict, "ENGINE": "django.db.backends.sqlite3",
                             "NAME": str(tmp_path / "new.sqlite3"), "OPTIONS": {}}, alias="fresh")
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
