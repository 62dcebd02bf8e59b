"""A node made ready before it takes traffic: every live build's index in place and verified here.

`manage.py warm_indexes` and gunicorn's master (config/gunicorn_conf.py) run this before any request
arrives, so no search on a new node waits for a load (services.indexes.loading). Runs as the tables'
owner, outside any agent's row-level-security scope: it reads every agent's builds.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from ...models import CollectionBuilt
from . import _usable, build_key, collection_root, discard_copy, store, write_index

logger = logging.getLogger("ragsite.search")


@dataclass(frozen=True)
class Warmed:
    """What warming did for one collection: `ready` (the copy here verified), `fetched` (from the store),
    `written` (from the rows: nothing was stored for the build; then stored for the next node), `stored`
    (the copy here was the only one: now stored for the next node) or `failed` (the next search loads
    it)."""

    agent_id: str
    collection: str
    outcome: str
    seconds: float


def warm_indexes(*, verify: bool = True) -> list[Warmed]:
    """Put every live build's index in place on this node. `verify`: check a copy already here byte for
    byte against the stored checksums (a full read of each file) and fetch it again when it differs."""
    warmed = []
    for built in CollectionBuilt.objects.select_related("collection__agent").order_by("collection_id"):
        collection = built.collection
        key, started = build_key(built), time.perf_counter()
        folder = collection_root(collection.pk) / key
        outcome = "ready"
        try:
            same = (
                store.verify_folder(collection_id=collection.pk, key=key, folder=folder)
                if verify and _usable(folder, built.analyzer)
                else None
            )
            if same is False:
                logger.warning(
                    "index of %s/%s differs from the stored one: fetching it again",
                    collection.agent.agent_id,
                    collection.name,
                )
                discard_copy(collection_id=collection.pk, key=key)
            stored = store.is_stored(collection_id=collection.pk, key=key)
            if not _usable(folder, built.analyzer):
                written = write_index(collection=collection)
                outcome = "fetched" if stored else "written"
                key, folder = written or (key, folder)
            if not stored and store.store_if_missing(collection=collection, key=key, folder=folder):
                outcome = "stored" if outcome == "ready" else outcome
        except Exception as exc:  # noqa: BLE001 - one collection's failure must not keep the others cold
            logger.error(
                "index of %s/%s not warmed: %s",
                collection.agent.agent_id,
                collection.name,
                type(exc).__name__,
            )
            outcome = "failed"
        seconds = time.perf_counter() - started
        warmed.append(Warmed(collection.agent.agent_id, collection.name, outcome, seconds))
    return warmed


__all__ = ["Warmed", "warm_indexes"]
