"""`make run`'s first hour: a demo agent, the sample handbook as a folder under KNOWLEDGE_ROOT, an admin
login.

Idempotent: a second run reuses the agent, its folder, its collection and the admin
user, and issues a key only when asked. Nothing is revoked silently.
"""

import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import transaction

from ..models import Agent, ApiKey, BuildRun, Collection
from . import known_answers
from .agents import create_agent, create_collection, issue_key
from .builds import build_collection
from .knowledge import agent_folder

SAMPLE_DOCS = Path(__file__).resolve().parents[1] / "sample_docs"


@dataclass
class DemoResult:
    agent: Agent
    collection: Collection
    new_key: str | None  # the raw key, when one was issued by this run
    active_keys: int
    known_answers: int | None  # how many known answers and controls this run gave the collection
    build: BuildRun | None  # the build this run made, if any
    admin_user: str
    admin_created: bool
    admin_password: str | None  # the generated password, when this run created the user with one


def set_up_demo(
    *,
    agent_id: str = "demo",
    collection_name: str = "handbook",
    new_key: bool = False,
    admin_user: str = "admin",
    admin_password: str = "",
) -> DemoResult:
    agent = Agent.objects.filter(agent_id=agent_id).first()
    raw = None
    if agent is None:
        agent, raw = create_agent(agent_id=agent_id, name="Demo agent")
    elif new_key:
        _key, raw = issue_key(agent=agent, name="make run NEW_KEY=1")

    folder = _sample_folder(agent, collection_name)
    collection = Collection.objects.filter(agent=agent, name=collection_name).first()
    if collection is None:
        collection = create_collection(
            agent=agent, name=collection_name, folder=folder, built_from="the bundled sample handbook"
        )
    elif not collection.folder and folder:
        collection.folder = folder
        collection.save(update_fields=["folder"])

    # Before the build, so that the build is measured against them.
    given = known_answers.give_sample_set(collection=collection)
    build = None
    if not hasattr(collection, "built"):
        build = build_collection(collection=collection, requested_by="demo")

    created, password = ensure_superuser(username=admin_user, password=admin_password)
    return DemoResult(
        agent=agent,
        collection=collection,
        new_key=raw,
        active_keys=ApiKey.objects.active().filter(agent=agent).count(),
        known_answers=None if given is None else len(given),
        build=build,
        admin_user=admin_user,
        admin_created=created,
        admin_password=password,
    )


def _sample_folder(agent: Agent, name: str) -> str:
    """Copy the sample documents to KNOWLEDGE_ROOT/<agent>/<name>/ once; a user's edits there are kept."""
    home = agent_folder(agent)
    if home is None:
        return ""
    target = home / name
    if not target.exists():
        target.mkdir(parents=True)
        for path in sorted(SAMPLE_DOCS.iterdir()):
            if path.is_file():
                shutil.copy2(path, target / path.name)
    return name


def ensure_superuser(*, username: str, password: str = "") -> tuple[bool, str | None]:
    """Make sure an admin login exists: (created, the generated password or None).

    An existing user is left as it is (its password is not changed behind its owner's back):
    `manage.py changepassword <user>` resets it.
    """
    users = get_user_model()
    with transaction.atomic():
        if users.objects.filter(username=username).exists():
            return False, None
        chosen = password or secrets.token_urlsafe(12)
        users.objects.create_superuser(username=username, email="", password=chosen)
    return True, None if password else chosen
