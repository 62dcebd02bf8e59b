"""Where a collection's documents live: one rule, used by builds, requests and the admin.

Precedence, first match wins:

1. `KNOWLEDGE_<AGENT>__<COLLECTION>_FOLDER`: an explicit folder for this agent's collection. One
   variable names one collection: an agent id that could spell another's variable, or names that
   spell the same one, are refused at creation (`variable_taken`), reported at start
   (collections.W010), and such a variable is never read (`ambiguous_source`).
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
from django.db.models import Value

from ragsite.errors import Conflict, RagsiteError

from .. import conf
from ..models import Agent, Collection, CollectionSource, Document

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
    if folder is not None and variable_shared(
        collection, bound=variable == conf.folder_variable(collection.name)
    ):
        # Read for neither owner: the folder could be another agent's. Staff resolve it (manage.py check).
        raise RagsiteError(
            f"{variable} could name more than one collection's folder and is not read; "
            "staff: see collections.W010 in manage.py check",
            code="ambiguous_source",
        )
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
    from .origins import summary

    remote = summary(collection)
    if remote:
        return remote
    try:
        found = source_folder(collection)
    except RagsiteError as exc:
        return exc.message
    return found.origin or "no folder (uploads only)"


def require_source(collection: Collection) -> None:
    """Refuse, before anything is queued, a build whose documents this process cannot see.

    The web process and the task cluster read the same environment and `.env`, so what
    is refused here would have failed in the worker; the answer names the collection. A remote source
    (services.origins) is not asked here: whether it answers is the build's to find out and record.
    """
    if CollectionSource.objects.filter(collection=collection).exclude(kind=CollectionSource.FOLDER).exists():
        return
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


def variable_shared(collection: Collection, *, bound: bool = False) -> bool:
    """True when `collection`'s folder variable (agent-qualified, or with `bound` the agent-less one)
    could also be another collection's. Reads every agent id (a short list, outside row-level security)."""
    part = conf.variable_part(collection.name)
    if bound:
        names = Collection.objects.filter(folder_variable_bound=True).exclude(pk=collection.pk)
        return "__" in part or any(
            conf.variable_part(n) == part for n in names.values_list("name", flat=True)
        )
    agent = collection.agent
    if conf.variable_part_problem(agent.agent_id):
        return True
    # Another agent's id spells this variable when its part, then `__`, starts it (an equal part, or
    # `acme--x` against `acme` + `x--payroll`); a sibling collection when its part is this one's. One
    # query reads both: every other agent's id, and this agent's other collections' names.
    spelt = f"{conf.variable_part(agent.agent_id)}__{part}"
    others = (
        Agent.objects.exclude(pk=agent.pk)
        .order_by()
        .annotate(kind=Value("agent"))
        .values_list("kind", "agent_id")
        .union(
            Collection.objects.filter(agent=agent)
            .exclude(pk=collection.pk)
            .order_by()
            .annotate(kind=Value("collection"))
            .values_list("kind", "name"),
            all=True,
        )
    )
    for kind, name in others:
        if kind == "agent" and spelt.startswith(f"{conf.variable_part(name)}__"):
            return True
        if kind == "collection" and conf.variable_part(name) == part:
            return True
    return False


def agent_id_problem(agent_id: str, *, exclude_pk: int | None = None) -> str:
    """For staff creating an agent: why `agent_id` would share folder variables ("" when it would not)."""
    problem = conf.variable_part_problem(agent_id)
    if problem:
        return problem
    head = conf.variable_part(agent_id)
    for other in Agent.objects.exclude(pk=exclude_pk).values_list("agent_id", flat=True):
        if other != agent_id and conf.variable_part(other) == head:
            return (
                f'agent id "{agent_id}" would share its folder variables (KNOWLEDGE_{head}__…) with agent '
                f"\"{other}\"; choose an id that differs in more than case, '-' and '_'"
            )
    return ""


def collection_name_problem(*, agent: Agent, name: str) -> str:
    """Why `agent` may not name a collection `name`: another of its own collections has the same folder
    variable (`my-docs` and `my_docs`). Only the agent's own names are consulted."""
    part = conf.variable_part(name)
    for other in Collection.objects.filter(agent=agent).exclude(name=name).values_list("name", flat=True):
        if conf.variable_part(other) == part:
            return (
                f'collection "{name}" would share its folder variable with your collection "{other}" '
                f"({conf.folder_variable(name, agent.agent_id)}); choose a name that differs in more "
                "than case, '-' and '_'"
            )
    return ""


def variable_collisions() -> list[str]:
    """Every agent id and collection whose folder variable is ambiguous or shared, for the start-up check."""
    found = []
    heads: dict[str, list[str]] = {}
    for agent_id in Agent.objects.order_by("agent_id").values_list("agent_id", flat=True):
        problem = conf.variable_part_problem(agent_id)
        if problem:
            found.append(problem)
        heads.setdefault(conf.variable_part(agent_id), []).append(agent_id)
    found += [
        f"agents {', '.join(repr(a) for a in ids)} share KNOWLEDGE_{head}__<COLLECTION>_FOLDER"
        for head, ids in heads.items()
        if len(ids) > 1
    ]
    names: dict[tuple, list[str]] = {}
    for agent_id, name, bound in Collection.objects.order_by("name").values_list(
        "agent__agent_id", "name", "folder_variable_bound"
    ):
        names.setdefault((agent_id, conf.variable_part(name)), []).append(name)
        if bound and "__" in conf.variable_part(name):
            found.append(f"{conf.folder_variable(name)} (bound) reads like an agent-qualified variable")
    found += [
        f"agent {agent_id!r}'s collections {', '.join(repr(n) for n in group)} share "
        f"{conf.folder_variable(group[0], agent_id)}"
        for (agent_id, _part), group in names.items()
        if len(group) > 1
    ]
    return found


def binding_problem(*, name: str, collection_pk: int | None) -> str | None:
    """For staff: why the collection `collection_pk` may not bind KNOWLEDGE_<name>_FOLDER, or None."""
    part = conf.variable_part(name)
    if "__" in part:
        return (
            f"{conf.folder_variable(name)} reads like an agent-qualified variable (its name holds two "
            "'-'/'_' in a row): bind a collection with another name"
        )
    holder = next(
        (
            other
            for other in Collection.objects.filter(folder_variable_bound=True)
            .exclude(pk=collection_pk)
            .select_related("agent")
            if conf.variable_part(other.name) == part
        ),
        None,
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
