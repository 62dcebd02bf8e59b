"""A folder file's readers as POSIX decides them (docs/sources.md, "Permissions"): its mode and its
access ACL, read from the file itself. Anybody-may-read is open; a group that may read is named; a file
only its owner may read is held. The ACL is written as Linux stores it (`system.posix_acl_access`), the
bytes `setfacl` writes, so no tool is needed."""

import grp
import os
import struct

import pytest

from collections_app.models import BuildRun, IdpGroup, Label, Paragraph
from collections_app.services import origins
from collections_app.services.agents import create_collection
from collections_app.services.builds import build_collection
from collections_app.services.origins.readers import OWNER_ONLY, UNMAPPED_LABEL, posix_readers

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's group needs root")

USER_OBJ, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x04, 0x08, 0x10, 0x20
NO_ID = 0xFFFFFFFF
R, RW = 4, 6


def set_acl(path, *entries):
    """Write an access ACL: entries of (tag, permissions, id), in the kernel's order (by tag, then id)."""
    raw = struct.pack("<I", 2) + b"".join(
        struct.pack("<HHI", tag, perm, ident) for tag, perm, ident in entries
    )
    os.setxattr(path, "system.posix_acl_access", raw)


def readers_of(path):
    return posix_readers(path, path.stat())


def name(gid):
    return grp.getgrgid(gid).gr_name


def test_the_mode_decides_without_an_acl(tmp_path):
    path = tmp_path / "leave.md"
    path.write_text("Carry-over is capped at five days.")
    os.chown(path, -1, 1)
    os.chmod(path, 0o644)
    assert readers_of(path) == ()  # anybody may read it: open
    os.chmod(path, 0o640)
    assert readers_of(path) == (name(1),)
    os.chmod(path, 0o600)
    assert readers_of(path) == (OWNER_ONLY,)  # its owner alone: held, never opened
    os.chown(path, -1, 54321)  # a group id with no name is named by its number
    os.chmod(path, 0o640)
    assert readers_of(path) == ("54321",)


def test_an_acl_names_every_group_it_lets_read_within_its_mask(tmp_path):
    path = tmp_path / "leave.md"
    path.write_text("Carry-over is capped at five days.")
    os.chown(path, -1, 0)
    set_acl(
        path,
        (USER_OBJ, RW, NO_ID),
        (GROUP_OBJ, R, NO_ID),
        (GROUP, R, 1),
        (GROUP, 0, 2),
        (MASK, R, NO_ID),
        (OTHER, 0, NO_ID),
    )
    assert readers_of(path) == (name(0), name(1))  # group 2's entry gives no read
    # The mask limits every group entry: none may read, so the owner alone may.
    set_acl(
        path, (USER_OBJ, RW, NO_ID), (GROUP_OBJ, R, NO_ID), (GROUP, R, 1), (MASK, 0, NO_ID), (OTHER, 0, NO_ID)
    )
    assert readers_of(path) == (OWNER_ONLY,)
    # Others may read: open, whatever the ACL's groups.
    set_acl(
        path, (USER_OBJ, RW, NO_ID), (GROUP_OBJ, R, NO_ID), (GROUP, R, 1), (MASK, R, NO_ID), (OTHER, R, NO_ID)
    )
    assert readers_of(path) == ()


def labels_of(collection, document):
    links = Paragraph.labels.through.objects.filter(
        paragraph__collection=collection, paragraph__document__name=document
    )
    return set(links.values_list("label__name", flat=True))


def test_an_acl_change_alone_relabels_a_folder_collection_without_embedding(agent, knowledge_folder):
    hr, finance = Label.objects.create(name="hr"), Label.objects.create(name="finance")
    IdpGroup.objects.create(name=name(1)).labels.add(hr)
    IdpGroup.objects.create(name=name(2)).labels.add(finance)
    folder = knowledge_folder(
        "shared",
        {
            "leave.md": "# Leave\n\nCarry-over is capped at five days.\n",
            "owner.md": "# Notes\n\nPrivate notes.\n",
        },
    )
    os.chown(folder / "leave.md", -1, 1)
    os.chmod(folder / "leave.md", 0o640)
    os.chmod(folder / "owner.md", 0o600)
    shared = create_collection(agent=agent, name="shared", method="fixed", size=80, per_reader=True)
    origins.set_source(collection=shared, kind="folder", settings={"readers_from_group": True})
    assert build_collection(collection=shared).status == BuildRun.SUCCEEDED
    assert labels_of(shared, "leave.md") == {"hr"}
    assert labels_of(shared, "owner.md") == {UNMAPPED_LABEL}  # only its owner may read it: held
    # finance's group is let read by an ACL entry: the next build re-labels, nothing embedded again.
    set_acl(
        folder / "leave.md",
        (USER_OBJ, RW, NO_ID),
        (GROUP_OBJ, R, NO_ID),
        (GROUP, R, 2),
        (MASK, R, NO_ID),
        (OTHER, 0, NO_ID),
    )
    again = build_collection(collection=shared)
    assert again.documents_relabelled == 1 and again.paragraphs_embedded == 0
    assert labels_of(shared, "leave.md") == {"hr", "finance"}
