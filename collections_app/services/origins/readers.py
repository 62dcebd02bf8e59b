"""Who a source says may read a document, and the labels that becomes (docs/sources.md, "Permissions").

A source names **groups**: an S3 object's tag (`readers_tag`), a git or WebDAV path rule
(`reader_rules`), a folder file's POSIX group (`readers_from_group`). Group names become labels through
the one mapping the admin keeps for the identity provider's groups (`IdpGroup` → labels, which reader
tokens and SCIM use too): a group the admin has not mapped gives no label, and a document whose groups
are all unmapped gets the reserved label `source-readers-unmapped` that no reader holds. Nothing here
writes but that label, once; the build records the labels on the document (`Document.source_labels`)
and its paragraphs (`builds.source_labels`).
"""

from __future__ import annotations

import grp
import os
import re
import struct
from collections.abc import Iterable
from functools import cached_property
from stat import S_IRGRP, S_IROTH

from ...models import IdpGroup, Label
from .base import InvalidSource

MAX_RULES = 200
MAX_GROUPS = 50  # group names one document may be given
MAX_GROUP_CHARS = IdpGroup._meta.get_field("name").max_length
SEPARATORS = re.compile(r"[,\s]+")
DEFAULT_TAG = "readers"
# The label of documents whose source names only groups the admin has not mapped (labels_for).
UNMAPPED_LABEL = "source-readers-unmapped"
UNMAPPED_DESCRIPTION = (
    "Given by a build to documents whose source names reader groups none of which is mapped to a label: "
    "no reader holds it, so they are read by nobody in a per-reader collection until the groups are mapped."
)
TAG_KEY = re.compile(r"^[\w .:/=+\-@]{1,128}$")


def split_groups(text: str) -> tuple[str, ...]:
    """The group names in a tag's value: split on commas and white space, empty parts dropped, each once."""
    names = [part for part in SEPARATORS.split(text or "") if part]
    return tuple(dict.fromkeys(name[:MAX_GROUP_CHARS] for name in names))[:MAX_GROUPS]


def checked_tag(raw: object) -> str:
    """An S3 source's `readers_tag`: the tag key naming an object's reader groups ("" reads no tags)."""
    if raw is None:
        return DEFAULT_TAG
    if not isinstance(raw, str) or (raw and not TAG_KEY.match(raw)):
        raise InvalidSource("an s3 source's readers_tag is a tag key (at most 128 characters), or empty")
    return raw


def checked_flag(raw: object, what: str) -> bool:
    if raw in (None, "", False, "false", "0", "no"):
        return False
    if raw in (True, "true", "1", "yes"):
        return True
    raise InvalidSource(f"{what} is true or false")


def checked_rules(raw: object, kind: str) -> list[dict]:
    """A git or WebDAV source's `reader_rules`: `[{"path": "hr/**", "readers": ["hr"]}, ...]`, each path a
    pattern on the document's name (`*` within a folder, `**` across folders, `?` one character)."""
    what = f"a {kind} source's reader_rules"
    if raw in (None, ""):
        return []
    if not isinstance(raw, list) or len(raw) > MAX_RULES:
        raise InvalidSource(f'{what} are a list of at most {MAX_RULES} {{"path": ..., "readers": [...]}}')
    rules = []
    for rule in raw:
        if not isinstance(rule, dict) or set(rule) != {"path", "readers"}:
            raise InvalidSource(f'each of {what} is {{"path": "hr/**", "readers": ["hr"]}}')
        path, readers = rule["path"], rule["readers"]
        if not isinstance(path, str) or not 0 < len(path) <= 500:
            raise InvalidSource(f"a path in {what} is a pattern of 1 to 500 characters")
        if isinstance(readers, str):
            readers = list(split_groups(readers))
        if (
            not isinstance(readers, list)
            or not 0 < len(readers) <= MAX_GROUPS
            or not all(isinstance(r, str) and 0 < len(r.strip()) <= MAX_GROUP_CHARS for r in readers)
        ):
            raise InvalidSource(f"the readers of a rule in {what} are 1 to {MAX_GROUPS} group names")
        rules.append({"path": path.strip("/"), "readers": [r.strip() for r in readers]})
    return rules


def rules_setting(raw: object, kind: str) -> dict:
    """{"reader_rules": the checked rules}, or {} when there are none (settings stay as they were)."""
    rules = checked_rules(raw, kind)
    return {"reader_rules": rules} if rules else {}


def _pattern(path: str) -> re.Pattern:
    out, i = [], 0
    while i < len(path):
        if path.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif path.startswith("**", i):
            out.append(".*")
            i += 2
        elif path[i] == "*":
            out.append("[^/]*")
            i += 1
        elif path[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(path[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


class PathRules:
    """A source's reader rules: a document's groups are those of every rule whose path matches its name."""

    def __init__(self, rules: Iterable[dict]):
        self.rules = [(_pattern(rule["path"]), tuple(rule["readers"])) for rule in rules]

    def readers(self, name: str) -> tuple[str, ...]:
        found = [group for pattern, groups in self.rules if pattern.match(name) for group in groups]
        return tuple(dict.fromkeys(found))


class GroupMapping(dict):
    """{identity-provider group name: the label ids it gives}, and the reserved label that holds a
    document back from every reader when its source names groups none of which is mapped."""

    @cached_property
    def unmapped(self) -> int:
        """The reserved label's id, made the first time a build or check needs it (the one write here)."""
        return Label.objects.get_or_create(
            name=UNMAPPED_LABEL, defaults={"description": UNMAPPED_DESCRIPTION}
        )[0].pk


def group_labels() -> GroupMapping:
    """The admin's mapping as one read."""
    ids: dict[str, set[int]] = {}
    for name, label_id in IdpGroup.labels.through.objects.values_list("idpgroup__name", "label_id"):
        ids.setdefault(name, set()).add(label_id)
    return GroupMapping({name: frozenset(labels) for name, labels in ids.items()})


def labels_for(groups: Iterable[str], mapping: GroupMapping) -> tuple[int, ...]:
    """The label ids `groups` map to together, sorted. A group not mapped gives none; when the source
    names groups and not one of them is mapped, the document gets the reserved label alone, which no
    reader holds unless an admin gives it: a restriction the mapping cannot yet express stays a
    restriction (docs/decisions/0093), never an open document."""
    groups = tuple(groups)
    labels = tuple(sorted({label for group in groups for label in mapping.get(group, ())}))
    return (mapping.unmapped,) if groups and not labels else labels


def signature(labels: Iterable[int]) -> str:
    """How a sync check compares a document's source labels: sorted ids, comma-separated."""
    return ",".join(str(label) for label in sorted(set(labels)))


# POSIX access ACLs as Linux stores them (the `system.posix_acl_access` attribute): a version (2), then
# entries of tag (u16), permissions (u16) and id (u32), little-endian (acl/include/acl_ea.h).
ACL_ATTRIBUTE = "system.posix_acl_access"
ACL_VERSION, ACL_GROUP_OBJ, ACL_GROUP, ACL_MASK, ACL_READ = 2, 0x04, 0x08, 0x10, 0x04
ACL_ENTRY = struct.Struct("<HHI")
OWNER_ONLY = "(owner only)"  # what a file no group and nobody else may read names: no group maps to it


def posix_readers(path, stat) -> tuple[str, ...]:
    """The groups that may read a folder's file, as POSIX decides it: none when anybody may (mode o+r:
    open to every reader); else its owning group if that may read, and every group its access ACL lets
    read (each within the ACL's mask). A group id with no name is named by its number; a file only its
    owner may read names OWNER_ONLY, which no group maps to, so it is held rather than opened."""
    if stat.st_mode & S_IROTH:
        return ()
    entries = _acl_entries(path)
    if entries is None:  # no ACL: the mode's group bits are the owning group's
        ids = [stat.st_gid] if stat.st_mode & S_IRGRP else []
    else:
        mask = next((perm for tag, perm, _id in entries if tag == ACL_MASK), ACL_READ)
        ids = [
            stat.st_gid if tag == ACL_GROUP_OBJ else gid
            for tag, perm, gid in entries
            if tag in (ACL_GROUP_OBJ, ACL_GROUP) and perm & mask & ACL_READ
        ]
    names = tuple(dict.fromkeys(_group_name(gid) for gid in ids))
    return names or (OWNER_ONLY,)


def _acl_entries(path) -> list[tuple[int, int, int]] | None:
    """The access ACL's entries, or None when the file has none (or the file system keeps none)."""
    try:
        raw = os.getxattr(path, ACL_ATTRIBUTE)
    except OSError:  # ENODATA: no ACL; ENOTSUP: a file system without them
        return None
    if len(raw) < 4 or struct.unpack_from("<I", raw)[0] != ACL_VERSION or (len(raw) - 4) % ACL_ENTRY.size:
        return None
    return list(ACL_ENTRY.iter_unpack(raw[4:]))


def _group_name(gid: int) -> str:
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)
