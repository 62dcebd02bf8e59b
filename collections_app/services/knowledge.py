"""Where a collection's documents live: one rule, used by builds, requests and the admin.

Precedence, first match wins:

1. `KNOWLEDGE_<AGENT>__<COLLECTION>_FOLDER`: an explicit folder for this agent's collection.
2. `KNOWLEDGE_<COLLECTION>_FOLDER`: only for the one collection of that name that staff bound to it
   (`Collection.folder_variable_bound`, set in the admin or by `manage.py bind_folder`; unique per
   name in the database). An agent creating a name never picks the variable up, and what other
   agents have is never consulted, so no answer depends on, or tells of, another agent's names.
3. `KNOWLEDGE_ROOT/<agent id>/<folder>`, where `folder` is the collection's own field: one
   path component, no separators, no `..`, nothing hidden. A symbolic link that leaves the
   agent's folder is refused at build time, by name.
4. Nothing: the collection is built from files uploaded in the admin alone.

Paths are facts about one machine. They are opened here and never stored, logged or
returned: every message names a variable, a folder name or a collection, never a path.
"""

import re
from dataclasses import dataclass
from pathlib import Path

from django.db import IntegrityError, transaction

from ragsite.errors import Conflict, RagsiteError

from .. import conf
from ..models import Agent, Collection, Document

MAX_FOLDER_CHARS = 100
# One path component of ordinary characters: a name, never a path.
FOLDER_NAME = re.compile(rf"^[^./\\\x00-\x1f][^/\\\x00-\x1f]{{0,{MAX_FOLDER_CHARS - 1}}}$")


@dataclass(frozen=True)
class SourceFolder:
    """The folder a build reads (None: uploads only) and, for people, where that came from."""

    path: Path | None
    origin: str  # "KNOWLEDGE_HR__HANDBOOK_FOLDER", 'folder "handbook" under KNOWLEDGE_ROOT', or ""


def validate_folder_name(folder: str) -> str:
    """A collection's folder is a single name under its agent's folder; anything path-like is refused."""
    folder = folder or ""
    if folder and (not FOLDER_NAME.match(folder) or folder.strip() != folder):
        raise RagsiteError(
            f"folder must be the name of one folder (1-{MAX_FOLDER_CHARS} characters, no '/', '\\' or "
            f"leading '.'), not a path; got {folder!r}",
            code="invalid_folder",
        )
    return folder


def agent_folder(agent: Agent) -> Path | None:
    root = conf.knowledge_root()
    return None if root is None else root / agent.agent_id


def available_folders(agent: Agent) -> list[str]:
    """The names of the sub-folders of `KNOWLEDGE_ROOT/<agent id>/`: what the admin offers."""
    home = agent_folder(agent)
    if home is None or not home.is_dir():
        return []
    names = []
    for entry in sorted(home.iterdir()):
        if FOLDER_NAME.match(entry.name) and entry.is_dir() and _inside(entry, home):
            names.append(entry.name)
    return names


def _inside(path: Path, home: Path) -> bool:
    try:
        return path.resolve().is_relative_to(home.resolve())
    except OSError:
        return False


def source_folder(collection: Collection) -> SourceFolder:
    """The folder `collection` is built from, by the precedence above. Raises when it is unusable."""
    agent_id = collection.agent.agent_id
    variable = conf.folder_variable(collection.name, agent_id)
    folder = conf.folder_from_variable(variable)
    if folder is None and collection.folder_variable_bound:
        variable = conf.folder_variable(collection.name)
        folder = conf.folder_from_variable(variable)
    if folder is not None:
        if not folder.is_dir():
            # Say which variable, never what it holds.
            raise RagsiteError(f"{variable} does not name a readable folder", code="no_source")
        return SourceFolder(folder, variable)
    if not collection.folder:
        return SourceFolder(None, "")
    validate_folder_name(collection.folder)
    home = agent_folder(collection.agent)
    where = f'folder "{collection.folder}" under KNOWLEDGE_ROOT'
    if home is None:
        raise RagsiteError(
            f'collection "{collection.name}" names {where}, but KNOWLEDGE_ROOT is not set', code="no_source"
        )
    folder = home / collection.folder
    if not folder.is_dir():
        raise RagsiteError(
            f'{where} does not exist for agent "{agent_id}" (collection "{collection.name}")',
            code="no_source",
        )
    if not _inside(folder, home):
        raise RagsiteError(
            f'{where} of collection "{collection.name}" is a link that leaves agent "{agent_id}"\'s folder; '
            "refused",
            code="source_outside_agent",
        )
    return SourceFolder(folder, where)


def describe_source(collection: Collection) -> str:
    """For people: where the documents come from, or why they cannot be read. Never a path."""
    try:
        found = source_folder(collection)
    except RagsiteError as exc:
        return exc.message
    return found.origin or "no folder (uploads only)"


def require_source(collection: Collection) -> None:
    """Refuse, before anything is queued, a build whose documents this process cannot see.

    The web process and the task cluster read the same environment and `.env`, so what
    is refused here would have failed in the worker; the answer names the collection.
    """
    try:
        found = source_folder(collection)
    except RagsiteError as exc:
        raise Conflict(
            f'collection "{collection.name}" cannot be built: {exc.message}', code=exc.code
        ) from None
    if (
        found.path is None
        and not collection.documents.filter(source=Document.UPLOAD).exclude(upload="").exists()
    ):
        raise Conflict(
            f'collection "{collection.name}" has no documents: give it a folder under KNOWLEDGE_ROOT/'
            f"{collection.agent.agent_id}/, set "
            f"{conf.folder_variable(collection.name, collection.agent.agent_id)}, "
            "or upload files in the admin",
            code="no_source",
        )


def binding_problem(*, name: str, collection_pk: int | None) -> str | None:
    """For staff: why the collection `collection_pk` may not bind KNOWLEDGE_<name>_FOLDER, or None."""
    holder = (
        Collection.objects.filter(name=name, folder_variable_bound=True)
        .exclude(pk=collection_pk)
        .select_related("agent")
        .first()
    )
    if holder is None:
        return None
    return f"{conf.folder_variable(name)} is already bound to {holder}; unbind it there first"


def bind_folder_variable(*, collection: Collection, bound: bool = True) -> Collection:
    """Staff's act (the admin, `manage.py bind_folder`): let `collection` read KNOWLEDGE_<NAME>_FOLDER.

    Never reachable from the API. The database allows one bound collection per name, whatever scope a
    caller runs in; a second binding is refused naming the collection that holds it (staff see all).
    """
    if bound:
        problem = binding_problem(name=collection.name, collection_pk=collection.pk)
        if problem:
            raise Conflict(problem, code="already_bound")
    collection.folder_variable_bound = bound
    try:
        with transaction.atomic():
            collection.save(update_fields=["folder_variable_bound"])
    except IntegrityError:  # bound elsewhere between the look and the write
        raise Conflict(
            f"{conf.folder_variable(collection.name)} is already bound to another collection",
            code="already_bound",
        ) from None
    return collection
