"""A collection's origin: a folder on this machine (the default) or a remote source read through its
maintained client (docs/sources.md).

`set_source` records a collection's kind, its settings (checked per kind) and its credentials (sealed at
rest, never shown again); `origin_of` gives the collection's remote origin, or None for a folder, and
the build (`services.sources.collection_sources`) and the sync check (`services.sync_check`) read it
through the same two calls, a listing and a fetch, so change detection, renames, the build swap,
webhooks and "keep in sync" are the folder's. Kinds: `folder`, `git`, `s3`, `webdav`, `web`.
"""

from __future__ import annotations

import json

from django.db import transaction

from ...models import Collection, CollectionSource
from . import git, readers, s3, web, webdav
from .base import Entry, InvalidSource, Origin, SourceUnavailable

__all__ = [
    "AVAILABLE",
    "Entry",
    "checked_source",
    "InvalidSource",
    "Origin",
    "SourceUnavailable",
    "describe",
    "forget_copies",
    "origin_of",
    "prune_copies",
    "readers_from_group",
    "reseal_credentials",
    "set_source",
]

# Each remote kind: (settings checker, credentials checker, origin class).
REMOTE = {
    CollectionSource.GIT: (git.checked_settings, git.checked_credentials, git.GitOrigin),
    CollectionSource.S3: (s3.checked_settings, s3.checked_credentials, s3.S3Origin),
    CollectionSource.WEBDAV: (webdav.checked_settings, webdav.checked_credentials, webdav.WebDavOrigin),
    CollectionSource.WEB: (web.checked_settings, web.checked_credentials, web.WebOrigin),
}
AVAILABLE = (CollectionSource.FOLDER, *REMOTE)


def checked_source(*, kind: str, settings: dict | None, credentials: dict | None) -> tuple[dict, dict | None]:
    """(the settings as stored, the credentials as stored or None to keep those set) for `kind`, or
    `InvalidSource` saying what is wrong; writes nothing (the admin's form asks it before saving)."""
    if kind not in AVAILABLE:
        raise InvalidSource(f"a source's kind is one of {', '.join(AVAILABLE)}")
    if settings is not None and not isinstance(settings, dict):
        raise InvalidSource("a source's settings are an object")
    if credentials is not None and not isinstance(credentials, dict):
        raise InvalidSource("a source's credentials are an object")
    if kind == CollectionSource.FOLDER:
        unknown = sorted(set(settings or {}) - {"readers_from_group"})
        if unknown or credentials:
            raise InvalidSource(
                "a folder source takes only readers_from_group: its folder is named as today "
                "(docs/collections.md)"
            )
        flag = readers.checked_flag((settings or {}).get("readers_from_group"), "readers_from_group")
        return ({"readers_from_group": True} if flag else {}), {}
    check_settings, check_credentials, _origin = REMOTE[kind]
    return check_settings(settings or {}), None if credentials is None else check_credentials(credentials)


def set_source(
    *, collection: Collection, kind: str, settings: dict | None = None, credentials: dict | None = None
) -> CollectionSource:
    """Make `kind` the collection's origin. Settings are checked (URLs against SOURCE_ALLOWED_HOSTS);
    credentials None keep those already set for the same kind, {} clear them. A change of origin
    is built by the next build (or sync check); what is built keeps answering meanwhile."""
    checked, given = checked_source(kind=kind, settings=settings, credentials=credentials)
    current = CollectionSource.objects.filter(collection=collection).first()
    if given is None:
        sealed = current.credentials if current is not None and current.kind == kind else ""
    else:
        sealed = json.dumps(given) if given else ""
    with transaction.atomic():
        source, _created = CollectionSource.objects.update_or_create(
            collection=collection, defaults={"kind": kind, "settings": checked, "credentials": sealed}
        )
        if _copy_outdated(current, source):
            pk = collection.pk
            transaction.on_commit(lambda: git.forget(pk))
    return source


def _copy_outdated(before: CollectionSource | None, after: CollectionSource) -> bool:
    """Whether this node's copy of a git repository no longer belongs to the collection's source."""
    if before is None or before.kind != CollectionSource.GIT:
        return False
    return after.kind != CollectionSource.GIT or after.settings.get("url") != before.settings.get("url")


def forget_copies(collection_id: int) -> None:
    """Remove what this node keeps of a collection's remote source (a git repository's copy, what its
    website's listings remembered)."""
    git.forget(collection_id)
    web.forget(collection_id)


def prune_copies() -> list[int]:
    """Remove this node's copies of sources no collection reads any more; the collection ids removed."""
    kinds = dict(CollectionSource.objects.values_list("collection_id", "kind"))
    gone = git.prune({pk for pk, kind in kinds.items() if kind == CollectionSource.GIT})
    return sorted(
        set(gone) | set(web.prune({pk for pk, kind in kinds.items() if kind == CollectionSource.WEB}))
    )


def readers_from_group(collection: Collection, source: CollectionSource | None | bool = False) -> bool:
    """Whether a folder collection's files give their readers by their POSIX group (origins.readers)."""
    if source is False:
        source = CollectionSource.objects.filter(collection=collection).first()
    return (
        source is not None
        and source.kind == CollectionSource.FOLDER
        and bool(source.settings.get("readers_from_group"))
    )


def origin_of(collection: Collection, source: CollectionSource | None | bool = False) -> Origin | None:
    """The collection's remote origin, or None when its documents are a folder's (or uploads); `source`
    its CollectionSource row when the caller read it already (None: it has none)."""
    if source is False:
        source = CollectionSource.objects.filter(collection=collection).first()
    if source is None or source.kind == CollectionSource.FOLDER:
        return None
    if source.kind not in REMOTE:  # a kind this version does not know (written by a newer one)
        raise SourceUnavailable(f"this server does not read {source.kind} sources", code="source_unknown")
    try:
        credentials = json.loads(source.credentials) if source.credentials else {}
    except ValueError:
        credentials = None
    if credentials is None:
        raise SourceUnavailable(
            f"the {source.kind} source's credentials cannot be read; set them again",
            code="source_credentials_sealed",
        )
    _check, _check_credentials, origin = REMOTE[source.kind]
    return origin(collection_id=collection.pk, settings=source.settings, credentials=credentials)


LABELS = {
    CollectionSource.GIT: ("the git repository", ("url", "branch", "path")),
    CollectionSource.S3: ("the S3 bucket", ("bucket", "prefix", "endpoint_url")),
    CollectionSource.WEBDAV: ("the WebDAV share", ("url", "path")),
    CollectionSource.WEB: ("the website", ("start_url", "sitemap_url")),
}


def summary(collection: Collection) -> str:
    """For people (the admin): the remote source in a line, whether credentials are set, never what they
    are; "" for a folder collection."""
    source = CollectionSource.objects.filter(collection=collection).first()
    if source is None or source.kind not in LABELS:
        return ""
    label, keys = LABELS[source.kind]
    parts = [f"{key} {source.settings[key]}" for key in keys if source.settings.get(key)]
    held = "credentials set" if source.credentials else "no credentials"
    return f"{label}: {', '.join(parts)} ({held})"


def describe(collection: Collection) -> dict:
    """What the API and the admin show of a collection's source: its kind and settings, and whether
    credentials are set (never what they are)."""
    source = CollectionSource.objects.filter(collection=collection).first()
    if source is None:
        return {"kind": CollectionSource.FOLDER, "settings": {}, "credentials": False}
    return {"kind": source.kind, "settings": dict(source.settings), "credentials": bool(source.credentials)}


def reseal_credentials() -> tuple[int, int]:
    """Seal every source's credentials again with the first of WEBHOOK_SECRET_KEYS (after a key was put in
    front); returns (resealed, unreadable: stored, but no configured key opens them). Nothing is built."""
    resealed = unreadable = 0
    for source in CollectionSource.objects.exclude(credentials=""):
        if not source.credentials:  # the field opens to "" when no configured key opens the row
            unreadable += 1
            continue
        source.save(update_fields=["credentials"])
        resealed += 1
    return resealed, unreadable
