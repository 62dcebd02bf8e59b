"""Documents uploaded by people in the admin, read by the next build beside the folder's.

An upload is named by the file's base name only: whatever directories a browser
or a client sent are dropped, so a name can never point anywhere. The bytes go
to Django's default storage; where that is on disk is never shown.
"""

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from django.core.files.base import ContentFile
from django.db import transaction
from django.utils import timezone

from ragsite.errors import Conflict, RagsiteError

from ..conf import settings
from ..models import Collection, Document
from ..text.extract import EMPTY, SUPPORTED_SUFFIXES, TOO_LARGE, UNSUPPORTED_TYPE, reads_as_text

logger = logging.getLogger("ragsite.uploads")

MAX_NAME_CHARS = 200


class UploadRefused(RagsiteError):
    code = "upload_refused"
    status = 400


def shown_name(name: str) -> str:
    """A file's name as a person wrote it, for a message: its base name only, never a directory, bounded."""
    base = PurePosixPath((name or "").replace("\\", "/")).name.strip()
    base = "".join(c if c.isprintable() else "?" for c in base)
    return base if len(base) <= MAX_NAME_CHARS else base[: MAX_NAME_CHARS - 1] + "…"


def upload_name(name: str) -> str:
    """The base name of an uploaded file, validated: a supported suffix, no directories, no hidden files."""
    base = PurePosixPath((name or "").replace("\\", "/")).name.strip()
    if not base or base in (".", "..") or base.startswith("."):
        raise UploadRefused(
            f'"{shown_name(name)}" is hidden or has no name; an uploaded file needs a name that does not '
            "start with a dot",
            code="invalid_name",
        )
    if len(base) > MAX_NAME_CHARS or any(ord(c) < 32 or c == "\x7f" for c in base):
        raise UploadRefused(
            f"a file name is at most {MAX_NAME_CHARS} printable characters", code="invalid_name"
        )
    # A name without a suffix (README) is allowed here and judged by its bytes in `upload_document`.
    if "." in base and not base.lower().endswith(SUPPORTED_SUFFIXES):
        raise UploadRefused(
            f'"{base}": {UNSUPPORTED_TYPE}; upload one of {", ".join(SUPPORTED_SUFFIXES)} or a text file '
            "without a "
            "suffix",
            code="unsupported_type",
        )
    return base


def _size(content) -> int:
    size = getattr(content, "size", None)
    return int(size) if size is not None else len(content)


def upload_document(*, collection: Collection, name: str, content) -> Document:
    """Store an uploaded file as a document of `collection`; the next build reads it.

    `content` is bytes or a Django `File` (an `UploadedFile` is checked by its size
    before it is read). Uploading a name the collection already has as an upload
    replaces that file; a name that comes from the collection's folder is refused,
    because the folder's copy would win at the build.
    """
    base = upload_name(name)
    limit = int(settings.MAX_UPLOAD_BYTES)
    size = _size(content)
    if size > limit:
        raise UploadRefused(
            f'"{base}": {TOO_LARGE}, {size:,} bytes; uploads are at most {limit:,} bytes', code="too_large"
        )
    if size == 0:
        raise UploadRefused(f'"{base}": {EMPTY}, the file has no bytes', code="empty_upload")
    data = content if isinstance(content, bytes | bytearray) else content.read()
    if len(data) > limit:  # a file object whose declared size was wrong
        raise UploadRefused(f'"{base}": {TOO_LARGE}, more than {limit:,} bytes', code="too_large")
    if "." not in base and not reads_as_text(data):
        raise UploadRefused(
            f'"{base}": {UNSUPPORTED_TYPE}, a file without a suffix must be text', code="unsupported_type"
        )
    with transaction.atomic():
        document = Document.objects.select_for_update().filter(collection=collection, name=base).first()
        if document is not None and document.source != Document.UPLOAD:
            raise Conflict(
                f'"{base}" already comes from the collection\'s folder; rename the file to upload it',
                code="duplicate_name",
            )
        old_file = document.upload.name if document is not None and document.upload else ""
        if document is None:
            # The fingerprint stays empty until the build reads the file; a replaced
            # upload keeps its built fingerprint, so the build sees the bytes changed.
            document = Document(collection=collection, name=base, source=Document.UPLOAD)
        document.updated_at = timezone.now()
        document.upload.save(base, ContentFile(bytes(data)), save=False)
        document.save()
        collection.rebuild_needed = f"{base} was uploaded; rebuild to include it"[:300]
        collection.save(update_fields=["rebuild_needed"])
    if old_file and old_file != document.upload.name:
        document.upload.storage.delete(old_file)
    logger.info("document %s uploaded to collection %s (%d bytes)", base, collection.pk, len(data))
    return document


@dataclass
class UploadOutcome:
    """What a multi-file upload did: names stored, and each refused name with the reason why."""

    stored: list[str] = field(default_factory=list)
    refused: list[tuple[str, str]] = field(default_factory=list)


def upload_documents(*, collection: Collection, files: Iterable) -> UploadOutcome:
    """Judge each file on its own: every good file is stored, each refused one named with its reason.

    `files` are Django `UploadedFile`s (or anything with ``name`` and ``size`` that `upload_document`
    reads). One bad file never costs the others.
    """
    outcome = UploadOutcome()
    for upload in files:
        try:
            outcome.stored.append(
                upload_document(collection=collection, name=upload.name, content=upload).name
            )
        except RagsiteError as exc:
            outcome.refused.append((shown_name(upload.name), exc.message))
    return outcome
