"""Where a build's documents come from, and reading them within bounds.

The folder's files (named relative to it) and the admin's uploads. A document's size is
asked of the file system before it is read, and the read itself stops past the limit, so
a file larger than `MAX_DOCUMENT_BYTES` (or a sparse multi-gigabyte one) is never loaded. A
name the store cannot hold is refused by a printable form of it before the file is opened
(docs/decisions/0020). Extraction itself runs in a bounded child
process (`collections_app.text.bounded`).
"""

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ragsite.bodies import BadBody, parse_json
from ragsite.errors import RagsiteError

from .. import conf
from ..conf import settings
from ..index.filters import FilterError, checked_attributes
from ..models import Collection, CollectionSource, Document
from ..text.bounded import BoundedExtractor, Limits, bounded_extractor
from ..text.extract import BAD_NAME, TOO_LARGE, Unreadable
from .knowledge import source_folder
from .origins import SourceUnavailable, origin_of, readers_from_group
from .origins.readers import GroupMapping, group_labels, labels_for, posix_readers

MAX_DOCUMENT_BYTES = 100 * 1024 * 1024
MAX_NAME_LENGTH = Document._meta.get_field("name").max_length
# `<document>.meta.json` beside a document holds its attributes (docs/collections.md); never a document
# itself.
SIDECAR_SUFFIX = ".meta.json"
MAX_SIDECAR_BYTES = 64 * 1024


# Names a copy, a download or an editor gives a file while it is being written, never read: the finished
# file gets its own name when the writer is done (seen with rsync, browsers, Office, LibreOffice, curl -O).
PARTIAL_SUFFIXES = (".part", ".partial", ".crdownload", ".download", ".tmp", ".temp", ".swp", "~")
PARTIAL_PREFIXES = ("~$", ".~lock.")


def is_partial_name(name: str) -> bool:
    """True for a file name that marks a file still being written (a temporary or partial name); dot-files
    are skipped beside these by `folder_entries`."""
    base = name.rsplit("/", 1)[-1].lower()
    return base.startswith(PARTIAL_PREFIXES) or base.endswith(PARTIAL_SUFFIXES)


def settle_seconds() -> float:
    """SYNC_SETTLE_SECONDS: how long a file's size and modification time stand still before it is read."""
    return max(0.0, float(settings.SYNC_SETTLE_SECONDS))


def stat_key(stat) -> tuple[int, int]:
    return stat.st_size, stat.st_mtime_ns


def settled(stat, now: float | None = None) -> bool:
    """Whether a file whose `os.stat` is ``stat`` has stood still for the settle window: every write moves
    its modification time, so one older than the window means size and time unchanged that long."""
    window = settle_seconds()
    if window <= 0:
        return True
    now = time.time() if now is None else now
    return now - stat.st_mtime_ns / 1e9 >= window


class StillWriting(Exception):
    """A file was written to while it was read, or too recently to be read (see `settled`)."""


@dataclass
class Source:
    """One document to read: its name within the collection, its size, and how to get its bytes.

    `read(limit)` returns at most `limit` bytes, so a file that grows after `size()` was asked
    is still never read whole. A source whose name the store cannot hold carries `bad_name`:
    it is refused by a printable form of its name without being opened."""

    name: str
    read: Callable[[int], bytes]
    size: Callable[[], int]
    kind: str = Document.FOLDER
    path: Path | None = None  # a folder file's, to check it stands still (never shown)
    bad_name: str = ""
    attributes: dict = field(default_factory=dict)
    attributes_note: str = ""  # why the sidecar was not taken, told on the build
    token: str = ""  # a remote source's change token (services.origins.Entry.token); "" for a folder file
    readers: tuple[str, ...] = ()  # the group names its source gives it (origins.readers)
    labels: tuple[int, ...] = ()  # the label ids those groups map to (the identity-provider mapping)

    def carried(self) -> dict:
        """What a build keeps of the source beside its text: its attributes, a note on its sidecar, and
        what its source says of it (its change token, its readers and their labels)."""
        return {
            "attributes": self.attributes,
            "notes": [self.attributes_note] if self.attributes_note else [],
            "source_token": self.token,
            "source_readers": list(self.readers),
            "source_labels": list(self.labels),
        }


def collection_sources(collection: Collection) -> list[Source]:
    """The source's documents (a folder's named relative to it, a remote source's relative to its path or
    prefix) followed by uploads, sorted by name. A remote source that cannot be listed raises
    `origins.SourceUnavailable`: the build fails and the last build keeps answering."""
    sources: dict[str, Source] = {}
    row = CollectionSource.objects.filter(collection=collection).first()
    origin = origin_of(collection, row)
    # KNOWLEDGE_ROOT/<agent>/<folder> or an override, by services.knowledge's precedence; raises by name.
    folder = source_folder(collection).path if origin is None else None
    by_group = origin is None and readers_from_group(collection, row)
    # The admin's identity-provider groups -> labels, read once per build, and only when it may be needed.
    mapping = group_labels() if origin is not None or by_group else GroupMapping()
    if origin is not None:
        for entry in remote_entries(origin):
            sources[entry.name] = Source(
                name=entry.name,
                read=lambda limit, e=entry: origin.fetch(e, limit),
                size=lambda e=entry: e.size,
                token=entry.token,
                bad_name=_name_problem(entry.name),
                readers=entry.readers,
                labels=labels_for(entry.readers, mapping),
            )
    if folder is not None:
        for entry in folder_entries(folder):
            attributes, note = read_sidecar(entry.path, entry.name)
            groups = file_readers(entry.path) if by_group else ()
            sources[entry.name] = Source(
                name=entry.name,
                read=_file_reader(entry.path),
                size=lambda p=entry.path: p.stat().st_size,
                path=entry.path,
                bad_name=entry.bad_name,
                attributes=attributes,
                attributes_note=note,
                readers=groups,
                labels=labels_for(groups, mapping),
            )
    for document in collection.documents.filter(source=Document.UPLOAD).exclude(upload=""):
        sources.setdefault(
            document.name,
            Source(
                name=document.name,
                read=_upload_reader(document),
                size=lambda d=document: d.upload.size,
                kind=Document.UPLOAD,
            ),
        )
    if not sources and origin is not None:
        raise SourceUnavailable(
            f"the {origin.kind} source lists no documents; the collection keeps what it has",
            code="source_empty",
        )
    if not sources:
        raise RagsiteError(
            f'collection "{collection.name}" has no documents: give it a folder under KNOWLEDGE_ROOT, '
            f"set {conf.folder_variable(collection.name, collection.agent.agent_id)} or upload files in the "
            "admin",
            code="no_source",
        )
    return [sources[name] for name in sorted(sources)]


@dataclass(frozen=True)
class FolderEntry:
    """A file of a source folder: its document name, where it is (never shown), and why its name is bad."""

    name: str
    path: Path
    bad_name: str = ""


def folder_entries(folder: Path) -> list[FolderEntry]:
    """The files a build reads from `folder`, sorted: hidden names, temporary and partial names
    (`is_partial_name`), symbolic links and folders are skipped.

    Shared by the build and the sync check (services.sync), so both see the same documents."""
    entries = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts) or not path.is_file() or path.is_symlink():
            continue
        name = relative.as_posix()
        if name.endswith(SIDECAR_SUFFIX):  # a document's attributes, read with it (read_sidecar)
            continue
        if is_partial_name(name):  # a file still being copied or downloaded under a temporary name
            continue
        problem = _name_problem(name)
        entries.append(FolderEntry(name=_printable(name) if problem else name, path=path, bad_name=problem))
    return entries


def file_readers(path: Path, stat=None) -> tuple[str, ...]:
    """A folder file's readers: the groups POSIX lets read it, its mode and access ACL
    (`origins.readers.posix_readers`); none for a file anybody may read. A file gone meanwhile: none."""
    try:
        return posix_readers(path, stat or path.stat())
    except OSError:
        return ()


def remote_entries(origin) -> list:
    """A remote source's listing as a build reads it: the names a folder would skip (hidden, partial,
    sidecars, which a remote source does not read yet) left out, so the build and the sync check agree."""
    return [
        entry
        for entry in origin.entries()
        if not any(part.startswith(".") for part in entry.name.split("/"))
        and not entry.name.endswith(SIDECAR_SUFFIX)
        and not is_partial_name(entry.name)
    ]


def read_sidecar(path, name: str) -> tuple[dict, str]:
    """The attributes in `<document>.meta.json` beside `path`, and why they were not taken ("" if they were).

    A sidecar that is too large, not JSON or not attributes leaves the document without attributes and
    says so on the build (naming the document, never the path); the document itself is still read.
    """
    sidecar = path.with_name(path.name + SIDECAR_SUFFIX)
    if not sidecar.is_file() or sidecar.is_symlink():
        return {}, ""
    try:
        if sidecar.stat().st_size > MAX_SIDECAR_BYTES:
            raise FilterError(f"larger than {MAX_SIDECAR_BYTES // 1024} KiB")
        with sidecar.open("rb") as handle:
            return checked_attributes(parse_json(handle.read(MAX_SIDECAR_BYTES + 1))), ""
    except (BadBody, FilterError) as exc:
        return (
            {},
            f"{name}{SIDECAR_SUFFIX} was not taken ({getattr(exc, 'message', None) or exc}): no attributes",
        )
    except OSError as exc:
        return (
            {},
            f"{name}{SIDECAR_SUFFIX} could not be read ({exc.strerror or type(exc).__name__}): no attributes",
        )


def _upload_reader(document: Document) -> Callable[[int], bytes]:
    def read(limit: int) -> bytes:
        with document.upload.open("rb") as handle:
            return handle.read(limit)

    return read


def _file_reader(path) -> Callable[[int], bytes]:
    def read(limit: int) -> bytes:
        with path.open("rb") as handle:
            return handle.read(limit)

    return read


def _name_problem(name: str) -> str:
    """Why the store cannot hold this file name ("" when it can)."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return "its name is not UTF-8"
    if "\x00" in name or len(name) > MAX_NAME_LENGTH:
        return (
            f"its name is longer than {MAX_NAME_LENGTH} characters"
            if len(name) > MAX_NAME_LENGTH
            else "bad name"
        )
    return ""


def _printable(name: str) -> str:
    """A form of a name that cannot be stored, for the refused list: undecodable bytes shown as �, cut
    short."""
    shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return shown if len(shown) <= 200 else shown[:199] + "…"


UNREADABLE_MARK = "unreadable"


def too_large_mark(size: int) -> str:
    """The fingerprint of a file too large to read, as the build records it and the sync check compares
    it: its size, so the same file is the same document and a grown one a changed one."""
    return f"too-large:{size}"


def read_bounded(source: Source) -> bytes:
    """The document's bytes; `Unreadable` (BAD_NAME, TOO_LARGE) without reading what must not be read;
    `StillWriting` for a folder file that moved within the settle window or while it was read."""
    if source.bad_name:
        raise Unreadable(source.bad_name, category=BAD_NAME)
    before = source.path.stat() if source.path is not None else None
    if before is not None and not settled(before):
        raise StillWriting(source.name)
    too_large = f"larger than {MAX_DOCUMENT_BYTES // (1024 * 1024)} MiB"
    if source.size() > MAX_DOCUMENT_BYTES:
        raise Unreadable(too_large, category=TOO_LARGE)
    data = source.read(MAX_DOCUMENT_BYTES + 1)
    if len(data) > MAX_DOCUMENT_BYTES:  # it grew after its size was asked
        raise Unreadable(too_large, category=TOO_LARGE)
    if before is not None and (
        len(data) != before.st_size or stat_key(source.path.stat()) != stat_key(before)
    ):
        raise StillWriting(source.name)  # written to while it was read: what was read is not the file
    return data


def document_extractor() -> BoundedExtractor:
    """This process's extractor for the configured limits (EXTRACT_TIMEOUT, EXTRACT_MEMORY_MB, OCR_*)."""
    return bounded_extractor(
        Limits(
            seconds=float(settings.EXTRACT_TIMEOUT),
            memory_bytes=int(settings.EXTRACT_MEMORY_MB) * 1024 * 1024,
            ocr=conf.ocr_options(),
        )
    )


def read_settled(source) -> bytes:
    """`read_bounded`, waiting once for a file written to within the settle window to stand still (a
    person who copies a folder and builds at once gets the files, a few seconds later); one still
    moving after that wait is `StillWriting`."""
    try:
        return read_bounded(source)
    except StillWriting:
        try:
            age = time.time() - source.path.stat().st_mtime_ns / 1e9
        except OSError:
            raise StillWriting(source.name) from None
        time.sleep(min(max(0.1, settle_seconds() - age), settle_seconds()))
        return read_bounded(source)
