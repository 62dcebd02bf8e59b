"""The reader-twin rule (DESIGN.md §5) for labels a source gives (docs/sources.md, "Permissions"): a
reader's whole answer from a collection whose source hides some documents from it equals the answer
from its twin, the same source without those documents. One test per kind that carries permissions
besides S3's tag (test_source_permissions.py): a git repository's and a WebDAV share's path rules on
real servers, and a folder's POSIX groups. The groups map to labels through the identity-provider
groups, as everywhere."""

import grp
import os

import pytest

from collections_app.models import BuildRun, IdpGroup, Label, Paragraph
from collections_app.services import origins
from collections_app.services.agents import create_collection, create_reader
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from tests.conftest import HANDBOOK

pytestmark = pytest.mark.django_db
QUESTIONS = (
    "annual leave days",
    "mileage per kilometre",
    "laptops encryption",
    "badges reception",
    "holiday",
)
RULES = [{"path": "leave.md", "readers": ["hr-team"]}, {"path": "travel.md", "readers": ["everyone"]}]
# Who reads what: leave.md is hr's, travel.md staff's, security.md (no group) anybody's. sam's twin holds
# no leave.md, hana's no travel.md; ghost, a reader nobody made, reads what holds no label.
WITHOUT = {"sam": "leave.md", "hana": "travel.md"}


@pytest.fixture
def readers(db):
    hr, staff = Label.objects.create(name="hr"), Label.objects.create(name="staff")
    IdpGroup.objects.create(name="hr-team").labels.add(hr)
    IdpGroup.objects.create(name="everyone").labels.add(staff)
    create_reader(external_id="sam", labels=["staff"])
    create_reader(external_id="hana", labels=["hr"])
    return hr, staff


def made(agent, name: str, kind: str, settings: dict, credentials: dict):
    collection = create_collection(agent=agent, name=name, method="fixed", size=80, per_reader=True)
    origins.set_source(collection=collection, kind=kind, settings=settings, credentials=credentials or None)
    run = build_collection(collection=collection)
    assert run.status == BuildRun.SUCCEEDED, run.error
    return collection


def labels_of(collection, name: str) -> set[str]:
    links = Paragraph.labels.through.objects.filter(
        paragraph__collection=collection, paragraph__document__name=name
    )
    return set(links.values_list("label__name", flat=True))


def answer(agent, collection, reader: str, question: str) -> dict:
    return search_collection(
        agent=agent, collection=collection, question=question, reader=reader, min_score=0, most=10, around=1
    )


def assert_twins_agree(agent, labelled, twins: dict) -> int:
    """Every reader's whole answer (texts, scores, ids, passages, order, the answer's own fields) from
    `labelled` equals its twin's; returns how many answers were compared."""
    assert labels_of(labelled, "leave.md") == {"hr"} and labels_of(labelled, "travel.md") == {"staff"}
    assert labels_of(labelled, "security.md") == set()
    # The labels hide something: sam is not shown hr's leave rules, hana is.
    assert "five days" not in str(answer(agent, labelled, "sam", "annual leave days"))
    assert "five days" in str(answer(agent, labelled, "hana", "annual leave days"))
    compared = 0
    for reader, twin in [*twins.items(), ("ghost", twins["sam"]), ("ghost", twins["hana"])]:
        for question in QUESTIONS:
            mine, theirs = answer(agent, labelled, reader, question), answer(agent, twin, reader, question)
            assert mine == theirs, (reader, question)
            compared += 1
    return compared


@pytest.mark.parametrize("kind", ["git", "webdav"])
def test_the_twin_rule_holds_for_a_sources_path_rules(kind, agent, readers, remote_handbook):
    settings, credentials = remote_handbook(kind)
    labelled = made(agent, "labelled", kind, {**settings, "reader_rules": RULES}, credentials)
    twins = {}
    for reader, left_out in WITHOUT.items():
        files = {name: text for name, text in HANDBOOK.items() if name != left_out}
        settings, credentials = remote_handbook(kind, files)
        twins[reader] = made(agent, f"twin-{reader}", kind, {**settings, "reader_rules": RULES}, credentials)
    assert assert_twins_agree(agent, labelled, twins) == 20


@pytest.mark.skipif(os.geteuid() != 0, reason="changing a file's group needs root")
def test_the_twin_rule_holds_for_a_folders_posix_groups(agent, readers, knowledge_folder):
    hr, staff = readers
    # Two groups of this machine stand for the organisation's: gid 1 for hr's, gid 2 for staff's.
    IdpGroup.objects.create(name=grp.getgrgid(1).gr_name).labels.add(hr)
    IdpGroup.objects.create(name=grp.getgrgid(2).gr_name).labels.add(staff)
    # leave.md and travel.md are not readable by others (0640), so their groups name their readers;
    # security.md is (0644): open to every reader, whatever its group.
    groups = {"leave.md": 1, "travel.md": 2, "security.md": 0}
    modes = {"leave.md": 0o640, "travel.md": 0o640, "security.md": 0o644}

    def folder_collection(name: str, files: dict):
        folder = knowledge_folder(name, files)
        for file in files:
            os.chown(folder / file, -1, groups[file])
            os.chmod(folder / file, modes[file])
        collection = create_collection(agent=agent, name=name, method="fixed", size=80, per_reader=True)
        origins.set_source(collection=collection, kind="folder", settings={"readers_from_group": True})
        assert build_collection(collection=collection).status == BuildRun.SUCCEEDED
        return collection

    labelled = folder_collection("labelled", HANDBOOK)
    twins = {
        reader: folder_collection(f"twin-{reader}", {n: t for n, t in HANDBOOK.items() if n != left_out})
        for reader, left_out in WITHOUT.items()
    }
    assert assert_twins_agree(agent, labelled, twins) == 20
