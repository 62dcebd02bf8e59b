"""The backup archive, as bytes: a gzipped tar of a manifest and named members (pure: no models, no settings).

`manifest.json` says what the archive holds, the format's version and what wrote it; every other member
is JSON Lines (one row an object), or under `rag/` and `uploads/` the bytes of a file. A reader refuses a
version newer than it knows, by name, before reading anything else.
"""

import io
import json
import tarfile
from dataclasses import dataclass, field

FORMAT = "ragsite-backup"
# 2: measure runs, and webhook secrets sealed with the operator's key when asked (1 is read as it was: an
# archive of 1 holds neither). A reader of 1 refuses a 2 rather than dropping what it does not know.
VERSION = 2
MANIFEST = "manifest.json"
FILE_FOLDERS = ("rag/", "uploads/")  # members kept as bytes, whatever their names
# A member larger than this is refused on reading (a backup of a 100,000-paragraph collection with
# 384-wide vectors is about 300 MB of JSON Lines, so this leaves room while bounding a hostile archive).
MAX_MEMBER_BYTES = 4 * 1024 * 1024 * 1024


class ArchiveError(Exception):
    """The archive is not one this code can read; the message says why, naming the member."""


@dataclass
class Archive:
    manifest: dict
    rows: dict[str, list[dict]] = field(default_factory=dict)  # "documents.jsonl" → rows
    files: dict[str, bytes] = field(default_factory=dict)  # "rag/x/meta.json", "uploads/a.pdf" → bytes


def write_archive(archive: Archive) -> bytes:
    """The archive's bytes: the manifest first, then members in name order (the same input, the same tar)."""
    buffer = io.BytesIO()
    manifest = {"format": FORMAT, "version": VERSION, **archive.manifest}
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, MANIFEST, json.dumps(manifest, indent=1, sort_keys=True).encode())
        for name in sorted(archive.rows):
            text = "".join(
                json.dumps(row, sort_keys=True, ensure_ascii=False) + "\n" for row in archive.rows[name]
            )
            _add(tar, name, text.encode("utf-8"))
        for name in sorted(archive.files):
            _add(tar, name, archive.files[name])
    return buffer.getvalue()


def _add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o600, 0
    tar.addfile(info, io.BytesIO(data))


def read_archive(data: bytes) -> Archive:
    """Parse an archive written by `write_archive`; `ArchiveError` for anything else, or a newer version."""
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ArchiveError(f"not a backup archive (a gzipped tar): {type(exc).__name__}") from None
    with tar:
        members = {}
        try:
            for member in tar:
                if not member.isfile() or member.name.startswith(("/", "..")) or "/../" in member.name:
                    raise ArchiveError(f"member {member.name[:200]!r} is not a plain file of the archive")
                if member.size > MAX_MEMBER_BYTES:
                    raise ArchiveError(
                        f"member {member.name[:200]!r} is larger than {MAX_MEMBER_BYTES} bytes"
                    )
                members[member.name] = tar.extractfile(member).read()
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ArchiveError(f"the archive is damaged: {type(exc).__name__}") from None
    if MANIFEST not in members:
        raise ArchiveError(f"{MANIFEST} is missing: not a ragsite backup")
    try:
        manifest = json.loads(members.pop(MANIFEST))
    except ValueError:
        raise ArchiveError(f"{MANIFEST} is not JSON") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ArchiveError(f"{MANIFEST}: format is not {FORMAT!r}")
    version = manifest.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ArchiveError(f"{MANIFEST}: version must be a whole number from 1")
    if version > VERSION:
        raise ArchiveError(
            f"{MANIFEST}: the archive is format version {version}, newer than this code reads ({VERSION}); "
            "restore it with the ragsite that wrote it or a later one"
        )
    archive = Archive(manifest=manifest)
    for name, raw in members.items():
        if name.endswith(".jsonl") and not name.startswith(FILE_FOLDERS):
            rows = []
            for number, line in enumerate(raw.decode("utf-8").splitlines(), start=1):
                try:
                    row = json.loads(line)
                except ValueError:
                    raise ArchiveError(f"{name} line {number} is not JSON") from None
                if not isinstance(row, dict):
                    raise ArchiveError(f"{name} line {number} is not an object")
                rows.append(row)
            archive.rows[name] = rows
        else:
            archive.files[name] = raw
    return archive
