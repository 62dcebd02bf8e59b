"""Laid-out model weights kept in a file that every process maps read-only, so they are stored once.

`load_bert` transposes, scales and concatenates the safetensors weights before use. Done in each
worker, that layout is ~90 MB of private memory per process. Here it is written once per model file
to `<cache folder>/bert-<key>.weights` and mapped with `mmap`: the pages live in the kernel's page
cache and count once however many processes map them.

File layout: an 8-byte magic, the JSON header's length and CRC-32 (4 bytes each, little-endian),
the JSON header (the arrays' names, shapes and offsets, and a CRC-32 of the data), then the float32
arrays, each starting on a 64-byte boundary. The key in the file name is a hash of the whole safetensors file
plus the attention head count (the query scaling depends on it) and this format's version, so a changed model
or layout never reuses a stale file. A file that is short, unparseable or fails its checksum is
rebuilt; one that cannot be written leaves the caller to lay the weights out privately.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import mmap
import os
import struct
import tempfile
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np

_MAGIC = b"RSBERT\x00\x01"
_VERSION = 1
_ALIGN = 64


class CacheUnavailable(Exception):
    """The cache folder cannot be created or written; the caller falls back to a private layout."""


def cache_key(source: Path, heads: int) -> str:
    """A short hash of the safetensors file's bytes, the head count and the format version."""
    digest = hashlib.sha256(f"v{_VERSION} heads={heads}\n".encode())
    with open(source, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:32]


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN


def write(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write `arrays` (float32) to `path` whole: to a temporary name first, then renamed.

    A reader never sees a partly written file. When another process got there first with a valid
    file, that one is kept, so every process maps the same file. Raises CacheUnavailable when the
    folder cannot be created or written.
    """
    entries, offset = [], 0
    for name, array in arrays.items():
        entries.append([name, list(array.shape), offset])
        offset = _aligned(offset + array.nbytes)
    crc = 0  # over the data as written, padding included, as `read` checks it
    for array in arrays.values():
        data = np.ascontiguousarray(array, dtype=np.float32)
        crc = zlib.crc32(b"\0" * (_aligned(data.nbytes) - data.nbytes), zlib.crc32(data, crc))
    header = json.dumps({"version": _VERSION, "arrays": entries, "data_bytes": offset, "crc32": crc}).encode()
    header += b" " * (_aligned(16 + len(header)) - 16 - len(header))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        descriptor, temporary = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise CacheUnavailable(type(exc).__name__) from None
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(_MAGIC + struct.pack("<II", len(header), zlib.crc32(header)) + header)
            for array in arrays.values():
                data = np.ascontiguousarray(array, dtype=np.float32).tobytes()
                handle.write(data + b"\0" * (_aligned(len(data)) - len(data)))
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)
        _publish(temporary, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise CacheUnavailable(type(exc).__name__) from None


def _publish(temporary: str, path: Path) -> None:
    """Give the written file its final name; the first valid file wins, so all processes map one.

    Two processes building at once each write a whole file; linking (which fails when the name
    exists) keeps the first, where a plain rename would leave the first process mapping an unlinked
    copy of its own. A file that is there but invalid is replaced.
    """
    try:
        os.link(temporary, path)
    except FileExistsError:
        if read(path) is None:
            os.replace(temporary, path)
            return
    except OSError:  # a filesystem without hard links
        os.replace(temporary, path)
        return
    os.unlink(temporary)


def read(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a valid cache file as read-only views of one shared mapping, or None.

    None means missing, truncated, corrupt (checksum) or of another format; the caller rebuilds.
    """
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size < 16:
                return None
            mapping = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except (OSError, ValueError):
        return None
    try:
        if mapping[:8] != _MAGIC:
            return None
        length, header_crc = struct.unpack("<II", mapping[8:16])
        start = 16 + length
        if start > size or zlib.crc32(mapping[16:start]) != header_crc:
            return None
        meta = json.loads(mapping[16:start].decode())
        if meta.get("version") != _VERSION or start + int(meta["data_bytes"]) != size:
            return None
        if zlib.crc32(memoryview(mapping)[start:]) != meta["crc32"]:
            return None
        arrays = {}
        for name, shape, offset in meta["arrays"]:
            count = int(np.prod(shape, dtype=np.int64))
            if offset % _ALIGN or offset + 4 * count > int(meta["data_bytes"]):
                return None
            # frombuffer over an ACCESS_READ mapping gives a plain, read-only ndarray: a forward pass
            # that wrote into a weight would raise rather than corrupt every process's model.
            arrays[name] = np.frombuffer(mapping, np.float32, count, start + offset).reshape(shape)
        return arrays
    except (ValueError, KeyError, TypeError, struct.error):
        return None


def load_or_build(
    folder: Path, source: Path, heads: int, build: Callable[[], dict[str, np.ndarray]]
) -> dict[str, np.ndarray]:
    """The laid-out weights of `source`, mapped from `folder`; built with `build` and written first
    when the folder has no valid file for this model. Raises CacheUnavailable when it cannot write."""
    path = folder / f"bert-{cache_key(source, heads)}.weights"
    arrays = read(path)
    if arrays is not None:
        return arrays
    write(path, build())
    arrays = read(path)
    if arrays is None:  # written but not readable back (a full disk, a filesystem without mmap)
        raise CacheUnavailable("the written cache file could not be mapped")
    return arrays
