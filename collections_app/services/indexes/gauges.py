"""This process's mapped search indexes, kept in a dict that publishes them as per-process gauges
(ragsite.instruments) whenever one is mapped or dropped: how many collections, and their files' bytes."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ragsite.instruments import INDEX_BYTES, INDEXES_MAPPED


class MappedIndexes(dict):
    """collection id -> (key, MappedIndex): services.indexes' per-process cache."""

    def __setitem__(self, collection_id, value) -> None:
        super().__setitem__(collection_id, value)
        self.publish()

    def pop(self, collection_id, *default):
        value = super().pop(collection_id, *default)
        self.publish()
        return value

    def publish(self) -> None:
        held = list(self.values())
        INDEXES_MAPPED.set(len(held))
        INDEX_BYTES.set(sum(_bytes_of(index.path) for _key, index in held))


@lru_cache(maxsize=1024)
def _bytes_of(path: Path) -> int:
    # A build's index files never change once written (a new build is a new folder).
    return sum(f.stat().st_size for f in Path(path).rglob("*") if f.is_file())
