"""The store reads every search makes, each one statement of SQL.

A search reads the store twice whatever the collection's size: its collection's current build with
the rows held back from it, and the texts of its hits. Through the ORM, building and compiling those
queries cost 0.35-0.6 ms each at 100,000 paragraphs, several times the statements themselves
(0.08 ms); written here once, they keep the ORM's semantics and the partial indexes' conditions (see
the models' Meta).
"""

from collections.abc import Callable
from functools import cache, lru_cache
from typing import NamedTuple

import numpy as np
from django.db import DEFAULT_DB_ALIAS, connection, connections

from ...models import Collection, CollectionBuilt, Document, Paragraph

# Per collection: the build record's row as the database gave it, and the record made from it.
_builds: dict[int, tuple[tuple, CollectionBuilt]] = {}

# What a held-back row's id is, in the statement's first column; the build record's row is marked BUILT.
HELD_DOCUMENT, HELD_PARAGRAPH, BUILT = 0, 1, 2


def search_state(collection: Collection) -> tuple[CollectionBuilt | None, np.ndarray, np.ndarray]:
    """The collection's build record (None when it was never built), and the ids of its documents out of
    search (in review, refused, switched off) and of its switched-off paragraphs: one statement.

    Read on every search, so that a build committed by another process is mapped at the next question
    and a switch takes effect there without a new build. Each part of the statement is written as its
    own query would be: the build record by its collection, and each held-back condition as its
    partial index's own (document_held_back, paragraph_disabled), so the planner reads only those rows
    (tests/collections/test_search_index.py reads the plans; with the models' default ordering the
    ORM's queries walked every paragraph of the collection, 170-590 ms at 100,000 paragraphs). One
    statement rather than two is one round trip fewer: on PostgreSQL over loopback 0.19 ms against
    0.22 ms for the two; on SQLite the same within the noise.

    Only when the build's row differs from the last one read in this process is a record made of it
    (through the ORM, so its fields are converted as any read converts them). Callers read the record
    and the arrays and never change them: they are shared.

    On a SQLite file the statement is skipped when nothing was written to the store since this
    connection last read the collection's state (`_change_marks`: SQLite's own count of commits by
    other connections, and this connection's count of rows it changed): the state read then is the
    state now. The check costs ~10 us against ~150 us for the statement (docs/decisions/0032).
    """
    db = connections[DEFAULT_DB_ALIAS]
    marks = _change_marks(db)
    if marks is not None:
        seen = getattr(db, "_ragsite_search_states", None)
        if seen is not None and seen[0] is db.connection and collection.pk in seen[1]:
            read_at, state = seen[1][collection.pk]
            if read_at == marks:
                return state
    found = fetch_all(_state_sql, [collection.pk, collection.pk, Document.ACTIVE, collection.pk])
    row, documents, paragraphs = None, [], []
    for r in found:
        if r[0] == BUILT:
            row = tuple(r[1:-1]) if row is None else row
        else:
            (documents if r[0] == HELD_DOCUMENT else paragraphs).append(r[-1])
    held = np.asarray(documents, dtype=np.int64), np.asarray(paragraphs, dtype=np.int64)
    for ids in held:
        ids.flags.writeable = False  # shared by the searches that find the same marks
    state = (_record(collection, row), *held)
    if marks is not None:
        seen = getattr(db, "_ragsite_search_states", None)
        if seen is None or seen[0] is not db.connection:
            # Per connection: its marks mean nothing to another (a new connection starts afresh).
            seen = db._ragsite_search_states = (db.connection, {})
        seen[1][collection.pk] = (marks, state)
    return state


# The attribute of a connection where services.audit counts the rows it wrote on it: (raw connection, n).
AUDIT_WRITES = "_ragsite_audit_writes"


def _change_marks(db) -> tuple[int, int] | None:
    """What changes whenever anything is written to the store, as this connection sees it, read before
    the state it vouches for (a write after that changes it again); None where it cannot vouch, and the
    state is read every time.

    SQLite's `PRAGMA data_version` changes when another connection (of any process) commits; this
    connection's `total_changes` counts the rows it inserted, updated or deleted (rolled back ones too:
    a needless read, never a missed one). Not vouched for: other databases; an in-memory database (its
    shared cache is one pager, whose version other connections' commits need not move); inside a
    transaction (its snapshot is its own); while queries are recorded (the statement is what a test
    or DEBUG looks at).
    """
    if db.vendor != "sqlite" or db.in_atomic_block or db.queries_logged or db.execute_wrappers:
        return None
    db.close_if_health_check_failed()
    db.ensure_connection()
    if db.is_in_memory_db():
        return None
    raw = db.connection
    with db.wrap_database_errors:
        cursor = raw.execute("PRAGMA data_version")
        try:
            version = cursor.fetchone()[0]
        finally:
            cursor.close()
    # The read audit's own entries (services.audit) change nothing a search reads: not counted, or
    # every search would read the state again because the one before it was recorded.
    audited_on, audited = getattr(db, AUDIT_WRITES, (None, 0))
    return int(version), int(raw.total_changes) - (audited if audited_on is raw else 0)


def fetch_all(statement: Callable[[str], str], params: list) -> list[tuple]:
    """The rows of one of this module's statements (``statement(vendor)``: its SQL with ``%s``
    placeholders, written once), run on the DB-API cursor beneath Django's.

    Django's cursor wrapper (execute wrappers, its placeholder rewriting for SQLite, the checks of
    each call) cost about as much as a statement over a handful of rows; here the same checks are
    made once (thread sharing, a broken transaction, the health check) and errors are wrapped as
    Django wraps them. While queries are recorded (DEBUG, a test's CaptureQueriesContext) or an
    execute wrapper is installed, the statement goes through Django's cursor, recorded as any other.
    """
    db = connections[DEFAULT_DB_ALIAS]  # `connection` looks this up again at each attribute
    if db.queries_logged or db.execute_wrappers:
        with db.cursor() as cursor:
            cursor.execute(statement(db.vendor), params)
            return cursor.fetchall()
    db.close_if_health_check_failed()
    db.ensure_connection()
    db.validate_thread_sharing()
    db.validate_no_broken_transaction()
    with db.wrap_database_errors:
        cursor = db.connection.cursor()
        try:
            cursor.execute(_native(statement, db.vendor), params)
            return cursor.fetchall()
        finally:
            cursor.close()


@lru_cache(maxsize=512)
def _native(statement: Callable[[str], str], vendor: str) -> str:
    """A statement as its driver takes it: SQLite's module wants ``?`` where Django writes ``%s``
    (the statements hold no literal ``%``)."""
    sql = statement(vendor)
    return sql.replace("%s", "?") if vendor == "sqlite" else sql


@cache
def _state_sql(vendor: str) -> str:
    """`search_state`'s statement, written once per database vendor (it names only tables and columns)."""
    quote = connection.ops.quote_name
    columns = [field.column for field in CollectionBuilt._meta.concrete_fields]
    padding = ", ".join(["NULL"] * len(columns))
    return (
        f"SELECT {BUILT}, {', '.join(quote(c) for c in columns)}, NULL "
        f"FROM {quote(CollectionBuilt._meta.db_table)} WHERE collection_id = %s "
        f"UNION ALL SELECT {HELD_DOCUMENT}, {padding}, id FROM {quote(Document._meta.db_table)} "
        "WHERE collection_id = %s AND (NOT (status = %s) OR NOT enabled) "
        f"UNION ALL SELECT {HELD_PARAGRAPH}, {padding}, id FROM {quote(Paragraph._meta.db_table)} "
        "WHERE collection_id = %s AND (NOT enabled OR in_review)"
    )


def current_build(collection: Collection) -> CollectionBuilt | None:
    """The collection's build record, or None when it was never built (`search_state`'s first part)."""
    return search_state(collection)[0]


def _record(collection: Collection, row: tuple | None) -> CollectionBuilt | None:
    """The build record of `row` as read: this process's record when the row is the one it was made
    from, else a record read again (one more statement, only after a build or an import)."""
    if row is None:
        return None
    cached = _builds.get(collection.pk)
    if cached is not None and cached[0] == row:
        return cached[1]
    built = CollectionBuilt.objects.filter(collection=collection).first()
    if built is not None:
        _builds[collection.pk] = (row, built)
    return built


class StoredRow(NamedTuple):
    """A paragraph's stored text and where it sits, as a search shows it."""

    id: int
    start: int  # start_char
    end: int  # end_char
    text: str
    section: str
    index: int  # its position within its document (the k of its chunk id)
    page_first: int | None  # the first and last page its text is on (None: its document has no pages)
    page_last: int | None
    document: int  # document_id
    name: str  # the document's name


def stored_rows(paragraph_ids: list[int]) -> list[StoredRow]:
    """The given paragraphs' `StoredRow`, in no order; ids no longer stored are simply absent."""
    if not paragraph_ids:
        return []
    return [StoredRow(*row) for row in fetch_all(_texts_statement(len(paragraph_ids)), paragraph_ids)]


@lru_cache(maxsize=256)
def _texts_statement(count: int) -> Callable[[str], str]:
    """`stored_rows`' statement for ``count`` ids, as `fetch_all` takes it (one per count, remembered)."""

    def sql(vendor: str) -> str:
        return f"{_texts_sql(vendor)} ({', '.join(['%s'] * count)})"

    return sql


@cache
def _texts_sql(vendor: str) -> str:
    """`stored_rows`' statement up to its list of ids, written once per database vendor."""
    quote = connection.ops.quote_name
    paragraph, document = quote(Paragraph._meta.db_table), quote(Document._meta.db_table)
    columns = ", ".join(
        f"{paragraph}.{quote(c)}"
        for c in (
            "id",
            "start_char",
            "end_char",
            "text",
            "section",
            "index",
            "page_first",
            "page_last",
            "document_id",
        )
    )
    return (
        f"SELECT {columns}, {document}.{quote('name')} FROM {paragraph} INNER JOIN {document} "
        f"ON ({paragraph}.{quote('document_id')} = {document}.{quote('id')}) WHERE "
        f"{paragraph}.{quote('id')} IN"
    )
