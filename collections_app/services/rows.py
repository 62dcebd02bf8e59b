"""The store reads every search makes, each one statement of SQL.

A search reads the store three times whatever the collection's size: its collection's current
build, which rows are held back from it, and the texts of its hits. Through the ORM, building
and compiling those queries cost 0.35-0.6 ms each at 100,000 paragraphs, several times the
statements themselves (0.08 ms); written here once, they keep the ORM's semantics and the
partial indexes' conditions (see the models' Meta).
"""

import numpy as np
from django.db import connection

from ..models import Collection, CollectionBuilt, Document, Paragraph

# Per collection: the build record's row as the database gave it, and the record made from it.
_builds: dict[int, tuple[tuple, CollectionBuilt]] = {}


def current_build(collection: Collection) -> CollectionBuilt | None:
    """The collection's build record (one a collection at most), or None when it was never built.

    Read on every search, so a build committed by another process is mapped at the next question.
    The row is read each time; only when it differs from the last one read in this process is a record
    made of it (through the ORM the read took 0.13 ms, the statement alone 0.05 ms, at 100,000
    paragraphs). Callers read the record and never change it: it is shared.
    """
    quote = connection.ops.quote_name
    sql = f"SELECT * FROM {quote(CollectionBuilt._meta.db_table)} WHERE {quote('collection_id')} = %s"
    with connection.cursor() as cursor:
        cursor.execute(sql, [collection.pk])
        row = cursor.fetchone()
    if row is None:
        return None
    cached = _builds.get(collection.pk)
    if cached is not None and cached[0] == tuple(row):
        return cached[1]
    built = next(iter(CollectionBuilt.objects.raw(sql, [collection.pk])), None)
    if built is not None:
        _builds[collection.pk] = (tuple(row), built)
    return built


def held_back(collection: Collection) -> tuple[np.ndarray, np.ndarray]:
    """Ids of the collection's documents out of search (in review, refused, switched off) and of
    its switched-off paragraphs, in one statement.

    Asked on every search, so a switch takes effect at the next question without a new build.
    Both sets are few, and each condition is written as its partial index's own (document_held_back,
    paragraph_disabled), so the planner reads only those rows; tests/collections/test_search_index.py
    reads the plans. With the models' default ordering the ORM's queries walked every paragraph of
    the collection (170-590 ms at 100,000 paragraphs).
    """
    quote = connection.ops.quote_name
    sql = (
        f"SELECT 0, id FROM {quote(Document._meta.db_table)} "
        "WHERE collection_id = %s AND (NOT (status = %s) OR NOT enabled) "
        f"UNION ALL SELECT 1, id FROM {quote(Paragraph._meta.db_table)} WHERE collection_id = %s AND NOT enabled"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [collection.pk, Document.ACTIVE, collection.pk])
        found = cursor.fetchall()
    documents = np.asarray([pk for kind, pk in found if kind == 0], dtype=np.int64)
    paragraphs = np.asarray([pk for kind, pk in found if kind == 1], dtype=np.int64)
    return documents, paragraphs


def stored_rows(paragraph_ids: list[int]) -> list[tuple]:
    """``(id, start_char, end_char, text, section, index, document_id, document name)`` of the
    given paragraphs, in no order; ids no longer stored are simply absent."""
    if not paragraph_ids:
        return []
    quote = connection.ops.quote_name
    paragraph, document = quote(Paragraph._meta.db_table), quote(Document._meta.db_table)
    columns = ", ".join(f"{paragraph}.{quote(c)}"
                        for c in ("id", "start_char", "end_char", "text", "section", "index", "document_id"))
    sql = (f"SELECT {columns}, {document}.{quote('name')} FROM {paragraph} INNER JOIN {document} "
           f"ON ({paragraph}.{quote('document_id')} = {document}.{quote('id')}) "
           f"WHERE {paragraph}.{quote('id')} IN ({', '.join(['%s'] * len(paragraph_ids))})")
    with connection.cursor() as cursor:
        cursor.execute(sql, paragraph_ids)
        return cursor.fetchall()
