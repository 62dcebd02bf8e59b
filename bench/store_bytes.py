"""Where the store's bytes go: search_scale's N-paragraph collection written into a fresh store.

    python bench/store_bytes.py --size 100000 --dataset ../shared/datasets/scifact
    python bench/store_bytes.py --size 100000 --dataset ... --database postgres://postgres@127.0.0.1:5432/ragsite_bytes

The rows are bench/scale_store.py's (`insert_collection`, the same texts, vectors and columns). SQLite: a new
file under data/bench/store/ (removed first), measured after a WAL checkpoint, and the `dbstat` virtual
table's pages and payload for every table and index. PostgreSQL: the named database is dropped and
created again, every table is vacuumed, then `pg_total_relation_size` (table, TOAST and indexes) of
each. "Beyond the text" subtracts the texts' UTF-8 bytes; the characters are printed too (the figure
docs/benchmarks.md used before this bench subtracted `length(text)`, which counts characters).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale_store  # noqa: E402  (the bench folder is not a package)

WORK = scale_store.ROOT / "data" / "bench" / "store"


def fresh_database(url: str, n: int) -> str:
    if url.startswith("postgres"):
        import psycopg

        base, name = url.rsplit("/", 1)
        with psycopg.connect(f"{base}/postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
            admin.execute(f'CREATE DATABASE "{name}"')
        return url
    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / f"store-{n}.sqlite3"
    for stale in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        stale.unlink(missing_ok=True)
    return f"sqlite:///{path}"


def sqlite_bytes(connection) -> dict:
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # the file's size then holds every row
        cursor.execute("PRAGMA page_size")
        page_size = cursor.fetchone()[0]
        cursor.execute(
            "SELECT name, count(*), sum(ncell), sum(payload), sum(unused), sum(pgsize) "
            "FROM dbstat GROUP BY name ORDER BY sum(pgsize) DESC"
        )
        parts = {
            name: dict(pages=pages, cells=cells, payload=payload, unused=unused, bytes=size)
            for name, pages, cells, payload, unused, size in cursor.fetchall()
        }
    path = connection.settings_dict["NAME"]
    return dict(all=Path(path).stat().st_size, page_size=page_size, parts=parts)


def postgres_bytes(connection) -> dict:
    with connection.cursor() as cursor:
        cursor.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
        tables = [row[0] for row in cursor.fetchall()]
        for table in tables:
            cursor.execute(f'VACUUM "{table}"')
        parts = {}
        for table in tables:
            cursor.execute(
                "SELECT pg_total_relation_size(%s), pg_relation_size(%s), pg_indexes_size(%s)",
                [table, table, table],
            )
            total, heap, indexes = cursor.fetchone()
            parts[table] = dict(bytes=total, heap=heap, indexes=indexes, toast=total - heap - indexes)
            cursor.execute(
                "SELECT indexrelname, pg_relation_size(indexrelid) FROM pg_stat_user_indexes "
                "WHERE relname = %s",
                [table],
            )
            parts[table]["each_index"] = dict(cursor.fetchall())
    return dict(all=sum(p["bytes"] for p in parts.values()), parts=parts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--dataset", type=Path, required=True, help="the SciFact folder (corpus.jsonl.gz)")
    parser.add_argument("--database", default="sqlite", help="sqlite (a new file), or a postgres:// URL")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()

    url = fresh_database(args.database, args.size)
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.db import connection

    corpus, _ = scale_store.load_scifact(args.dataset, 1)
    _collection, facts = scale_store.insert_collection(
        args.size, corpus, "sentence-transformers/all-MiniLM-L6-v2"
    )
    if connection.vendor == "postgresql":
        measured = postgres_bytes(connection)
        length = "octet_length(text), length(text)"
    else:
        measured = sqlite_bytes(connection)
        length = "length(CAST(text AS BLOB)), length(text)"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count(*), sum({length.split(', ')[0]}), sum({length.split(', ')[1]}) FROM agents_chunks"
        )
        rows, text_bytes, text_chars = cursor.fetchone()
    n = rows
    figures = dict(
        vendor=connection.vendor,
        paragraphs=n,
        insert_s=round(facts.get("insert_s", 0), 1),
        all=measured["all"],
        text_bytes=int(text_bytes),
        text_chars=int(text_chars),
        per_paragraph=dict(
            all=round(measured["all"] / n),
            text=round(text_bytes / n),
            beyond_text=round((measured["all"] - text_bytes) / n),
            beyond_text_chars=round((measured["all"] - text_chars) / n),
        ),
        parts=measured["parts"],
    )
    print(f"{connection.vendor}, {n:,} paragraphs: {figures['per_paragraph']} bytes a paragraph")
    for name, part in sorted(measured["parts"].items(), key=lambda item: -item[1]["bytes"]):
        if part["bytes"] >= n:  # a byte a paragraph or more
            detail = {k: v for k, v in part.items() if k != "bytes"}
            print(f"  {name:48s} {part['bytes'] / n:8.1f} B/paragraph  {detail}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
