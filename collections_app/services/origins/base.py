"""What every remote source shares: a listing's entries, the refusal of an unreachable source, and the
bounds (schemes, hosts, counts, time) a listing and a fetch are held to."""

from __future__ import annotations

import ipaddress
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit

from ragsite.errors import RagsiteError

from ...conf import settings
from ..webhooks.transport import public

MAX_URL_CHARS = 2000
ANY_PUBLIC_HOST = "*"


@dataclass(frozen=True)
class Entry:
    """One document of a remote source: its name within the collection, its size in bytes, and a token
    that changes when its bytes may have (an ETag, a git blob id), and `key` to fetch it by; `readers`
    the group names the source gives it (origins.readers), () when it gives none."""

    name: str
    size: int
    token: str
    key: str
    readers: tuple[str, ...] = ()


class Origin(Protocol):
    """A remote source as the build and the sync check use it: a listing, and a fetch of one entry."""

    def entries(self) -> list[Entry]:
        """Every document of the source, sorted by name; `SourceUnavailable` when it cannot be listed."""

    def fetch(self, entry: Entry, limit: int) -> bytes:
        """At most `limit` bytes of the entry; `SourceUnavailable` when they cannot be had."""


class SourceUnavailable(RagsiteError):
    """The source cannot be reached or refused its credentials: the build fails and the last build keeps
    answering; the sync check says so and tells the agent's hooks (`sync.failed`). The message names the
    kind and what went wrong, never a credential."""

    code = "source_unavailable"
    status = 503


class InvalidSource(RagsiteError):
    code = "invalid_source"
    status = 400


def cached(collection_id: int, suffix: str) -> Path:
    """This node's copy of what a collection's remote source keeps between listings, under SOURCE_CACHE_DIR
    (``suffix`` tells the kinds apart: ``.git`` a bare repository, ``.web.json`` a website's listing)."""
    return Path(str(settings.SOURCE_CACHE_DIR)) / f"collection-{collection_id}{suffix}"


def remove_cached(path: Path) -> None:
    """Remove a cached copy, a folder or a file; nothing when it is not there."""
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def prune_cached(suffix: str, keep: set[int]) -> list[int]:
    """Remove this node's ``suffix`` copies of every collection not in ``keep`` (those a deletion on another
    node could not reach); the collection ids removed."""
    root = cached(0, suffix).parent
    removed = []
    for path in root.glob(f"collection-*{suffix}") if root.is_dir() else ():
        number = path.name[len("collection-") : -len(suffix)]
        if number.isdigit() and int(number) not in keep:
            remove_cached(path)
            removed.append(int(number))
    return sorted(removed)


def timeout_seconds() -> float:
    """SOURCE_TIMEOUT: the seconds one listing or one fetch may take."""
    return max(1.0, float(settings.SOURCE_TIMEOUT))


def max_documents() -> int:
    """SOURCE_MAX_DOCUMENTS: the most documents a remote source's listing may hold."""
    return max(1, int(settings.SOURCE_MAX_DOCUMENTS))


def too_many(kind: str) -> SourceUnavailable:
    return SourceUnavailable(
        f"the {kind} source holds more than {max_documents()} documents (SOURCE_MAX_DOCUMENTS); "
        "narrow its path or prefix",
        code="source_too_large",
    )


def checked_url(url: object, *, schemes: tuple[str, ...], what: str) -> str:
    """`url` if its scheme is one of `schemes`, it names a host without a user or password, and that host
    is allowed (`check_host`); `InvalidSource` saying why not."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise InvalidSource(f"{what} is a URL of 1 to {MAX_URL_CHARS} characters")
    try:
        split = urlsplit(url)
        split.port  # noqa: B018 - raises ValueError for a port out of range
    except ValueError:
        raise InvalidSource(f"{what} cannot be parsed") from None
    if split.scheme not in schemes:
        raise InvalidSource(
            f"{what} is {' or '.join(s + '://' for s in schemes)}, not {split.scheme or 'a path'}"
        )
    if not split.hostname or split.username is not None or split.password is not None:
        raise InvalidSource(f"{what} names a host, without a user name or password (credentials go apart)")
    check_host(split.hostname, split.port or 443)
    return url


def check_host(host: str, port: int) -> None:
    """Refuse a host SOURCE_ALLOWED_HOSTS does not allow. Empty: loopback addresses only. Entries are host
    names (exact), networks (`10.1.0.0/16`, an address alone is its own network), or `*`: any host whose
    every address is public. Every address the name resolves to must be allowed."""
    allowed = [str(a).strip().lower() for a in settings.SOURCE_ALLOWED_HOSTS if str(a).strip()]
    if host.lower() in allowed:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        # A name that does not resolve cannot be checked, so it is not allowed (a 400 when it is set).
        raise InvalidSource(f'the source host "{host}" does not resolve') from None
    addresses = list(dict.fromkeys(info[4][0].split("%", 1)[0] for info in infos))
    networks = []
    for entry in allowed:
        try:
            networks.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            continue
    for address in addresses:
        ip = ipaddress.ip_address(address)
        if not allowed and ip.is_loopback:
            continue
        if any(ip.version == n.version and ip in n for n in networks):
            continue
        if ANY_PUBLIC_HOST in allowed and public(address):
            continue
        raise InvalidSource(
            f'the source host "{host}" is not allowed: SOURCE_ALLOWED_HOSTS '
            + ("is empty, which allows loopback only" if not allowed else "does not list it or its network")
        )
