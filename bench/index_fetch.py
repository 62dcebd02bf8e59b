"""How long a web node takes to get a build's index it lacks: fetched from the database and verified
(services.index_store), against copying the same files on the same disk, in one process (issue 29, item 3).

    python bench/index_fetch.py 100000                      # the bench's SQLite store (bench/scale_store.py)
    python bench/index_fetch.py 100000 --database-url postgres://postgres@127.0.0.1:5432/bench
    python bench/index_fetch.py 100000 --rounds 1 --copies 10     # and the bytes of a 1M index

The index is the scale bench's own (data/bench/scale/, made by `populate` when missing). On SQLite it is
stored beside that store's build; with --database-url the same files are stored in that database under
a bench agent (migrated first), measured, and removed. Each round fetches into a scratch folder (every
chunk read, every file checked against its SHA-256, the folder opened as an index, fsync, rename) and
copies the folder with an fsync of each file (the disk's own speed); rounds are interleaved. The store's
growth and what writing the index from the rows took (populated-N.json) are printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from scale_store import WORK, load_scifact, populate, provenance, setup_django  # noqa: E402


def copy_with_fsync(source: Path, target: Path) -> None:
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        out = target / path.relative_to(source)
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "rb") as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, 4 << 20)
            dst.flush()
            os.fsync(dst.fileno())


def store_size(connection) -> int:
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            cursor.execute("PRAGMA page_count")
            pages = cursor.fetchone()[0]
            cursor.execute("PRAGMA freelist_count")
            pages -= cursor.fetchone()[0]
            cursor.execute("PRAGMA page_size")
            return pages * cursor.fetchone()[0]
        cursor.execute("SELECT pg_total_relation_size('collection_index_chunk')")
        return int(cursor.fetchone()[0])


def bench_collection(n: int, args):
    """The collection whose index is measured and its index folder: the scale store's own on SQLite, a
    bench agent's in the --database-url database (holding the scale store's files)."""
    if args.database_url is None:
        setup_django(n)
        corpus, _asked = load_scifact(args.dataset, 0)
        facts = populate(n, corpus, "all-MiniLM-L6-v2")
        from collections_app.models import CollectionBuilt
        from collections_app.services.indexes import build_key, collection_root

        built = CollectionBuilt.objects.select_related("collection__agent").get()
        return built.collection, collection_root(built.collection.pk) / build_key(built), facts
    folder = next((WORK / f"indexes-{n}").glob("c*/2*/meta.json")).parent  # run the SQLite bench first
    facts = json.loads((WORK / f"populated-{n}.json").read_text())
    os.environ["DATABASE_URL"] = args.database_url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    return bench_collections(1)[0], folder, facts


def bench_collections(count: int) -> list:
    """`count` collections of a bench agent, to store copies of one index under (each holds one build's)."""
    from collections_app.services.agents import create_agent, create_collection, get_agent

    try:
        agent = get_agent("bench-fetch")
    except Exception:  # noqa: BLE001 - not there yet
        agent, _raw = create_agent(agent_id="bench-fetch")
    names = ["fetch"] + [f"fetch-{i}" for i in range(1, count)]
    return [
        agent.collections.filter(name=name).first() or create_collection(agent=agent, name=name)
        for name in names
    ]


def copies_phase(folder: Path, copies: int) -> dict:
    """The bytes of a bigger index without making its store: `copies` copies of this index stored under
    as many bench collections, then all fetched one after another (one round), then removed. The fetch
    has no per-row work, so this is the time of an index of `copies` times the bytes."""
    from collections_app.services import index_store

    collections = bench_collections(copies)
    started = time.perf_counter()
    for collection in collections:
        index_store.store_files(collection=collection, key=folder.name, folder=folder)
    store_s = time.perf_counter() - started
    scratch = WORK / "fetch-copies"
    shutil.rmtree(scratch, ignore_errors=True)
    started = time.perf_counter()
    for number, collection in enumerate(collections):
        index_store.fetch_files(collection_id=collection.pk, key=folder.name, root=scratch / str(number))
    fetch_s = time.perf_counter() - started
    shutil.rmtree(scratch, ignore_errors=True)
    for collection in collections:
        collection.index_files.all().delete()
    return {"copies": copies, "copies_store_s": store_s, "copies_fetch_s": fetch_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--database-url", help="store in this database instead (PostgreSQL)")
    parser.add_argument(
        "--copies", type=int, default=0, help="also store and fetch this many copies (a bigger index's bytes)"
    )
    parser.add_argument(
        "--dataset", type=Path, default=Path(os.environ.get("SCIFACT", ROOT / "data" / "scifact"))
    )
    args = parser.parse_args()
    collection, folder, facts = bench_collection(args.n, args)
    from django.db import connection

    from collections_app.services import index_store

    key = folder.name
    index_bytes = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    before = store_size(connection)
    started = time.perf_counter()
    index_store.store_files(collection=collection, key=key, folder=folder)
    store_s = time.perf_counter() - started
    growth = store_size(connection) - before
    scratch = WORK / f"fetch-{args.n}"
    fetch, copy, verify = [], [], []
    for _round in range(args.rounds):
        shutil.rmtree(scratch, ignore_errors=True)
        started = time.perf_counter()
        fetched = index_store.fetch_files(collection_id=collection.pk, key=key, root=scratch)
        fetch.append(time.perf_counter() - started)
        started = time.perf_counter()
        assert index_store.verify_folder(collection_id=collection.pk, key=key, folder=fetched)
        verify.append(time.perf_counter() - started)
        shutil.rmtree(scratch, ignore_errors=True)
        started = time.perf_counter()
        copy_with_fsync(folder, scratch / key)
        copy.append(time.perf_counter() - started)
    shutil.rmtree(scratch, ignore_errors=True)
    if args.database_url is not None:
        collection.index_files.all().delete()
    result = {
        "n": args.n,
        "database": connection.vendor,
        "index_bytes": index_bytes,
        "store_growth_bytes": growth,
        "store_s": store_s,
        "fetch_s": statistics.median(fetch),
        "fetch_rounds_s": fetch,
        "copy_s": statistics.median(copy),
        "verify_s": statistics.median(verify),
        "fetch_vs_copy": statistics.median(fetch) / statistics.median(copy),
        "fetch_mb_s": index_bytes / statistics.median(fetch) / 1e6,
        "rows_write_s": facts.get("index_write_s"),
        "provenance": provenance(),
    }
    if args.copies:
        result.update(copies_phase(folder, args.copies))
        result["copies_bytes"] = index_bytes * args.copies
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
