"""Backup and restore of everything a collection or an agent holds, as one versioned archive each.

`back_up(collection=…)` or `back_up(agent=…)` gives the archive's bytes; `restore(data, …)` brings one
back into this store (empty of it, or under a new name), on SQLite or PostgreSQL alike. The format
(`archive`) is versioned, and an archive newer than this code is refused before anything is written.
The management commands `backup` and `restore` and the admin's action are adapters over these two.
"""

from ragsite.errors import RagsiteError

from ...models import Agent, Collection
from .agent import dump_agent, restore_agent
from .archive import VERSION, ArchiveError, read_archive, write_archive
from .collection import dump_collection, restore_collection
from .credentials import CredentialsError

__all__ = ["VERSION", "InvalidBackup", "back_up", "restore"]


class InvalidBackup(RagsiteError):
    code = "invalid_backup"
    status = 400


def back_up(
    *, collection: Collection | None = None, agent: Agent | None = None, credentials_key: str | None = None
) -> bytes:
    """The archive of one collection or one agent (exactly one of the two). With `credentials_key` (a Fernet
    key the operator keeps) an agent's webhook secrets are in it, sealed with that key; never in plain text.
    A collection holds no credential."""
    if (collection is None) == (agent is None):
        raise ValueError("back up one collection or one agent")
    if collection is not None:
        return write_archive(dump_collection(collection))
    try:
        return write_archive(dump_agent(agent, credentials_key=credentials_key))
    except CredentialsError as exc:
        raise InvalidBackup(str(exc)) from None


def restore(
    data: bytes, *, agent: Agent | None = None, name: str | None = None, credentials_key: str | None = None
) -> Collection | Agent:
    """Restore an archive: a collection for `agent` (under `name` when given), or an agent (as `name`);
    `credentials_key` opens an agent archive's sealed webhook secrets (else its hooks get new ones)."""
    try:
        archive = read_archive(data)
    except ArchiveError as exc:
        raise InvalidBackup(str(exc)) from None
    try:
        if archive.manifest.get("kind") == "collection":
            if agent is None:
                raise InvalidBackup("a collection is restored for an agent: name one")
            return restore_collection(archive, agent=agent, name=name)
        return restore_agent(archive, agent_id=name, credentials_key=credentials_key)
    except (KeyError, ValueError, TypeError) as exc:
        raise InvalidBackup(
            f"the archive's rows do not fit this store: {type(exc).__name__} {exc}"[:500]
        ) from None
