"""Where a collection's documents live: KNOWLEDGE_ROOT/<agent>/<folder>, the overrides, and what is refused."""

import pytest

from collections_app.models import BuildRun, Paragraph
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection, request_build, run_build
from collections_app.services.knowledge import available_folders, describe_source, source_folder
from ragsite.errors import Conflict, RagsiteError

pytestmark = pytest.mark.django_db

SECRET_A = {"pay.md": "# Pay\n\nAgent A's salary bands are confidential: band seven pays ninety thousand.\n"}
PUBLIC_B = {"hello.md": "# Hello\n\nAgent B answers questions about the canteen menu on Fridays.\n"}


def texts(collection) -> str:
    return " ".join(Paragraph.objects.filter(collection=collection).values_list("text", flat=True))


def test_a_collection_builds_from_its_agents_sub_folder_added_after_start(agent, knowledge_root):
    collection = create_collection(agent=agent, name="handbook", folder="", method="fixed")
    knowledge_root("alpha", "hr-share", SECRET_A)  # dropped in while the process runs: no restart
    assert available_folders(agent) == ["hr-share"]
    collection.folder = "hr-share"
    collection.save()
    run = build_collection(collection=collection)
    assert run.status == BuildRun.SUCCEEDED, run.error
    assert "band seven" in texts(collection)
    assert describe_source(collection) == 'folder "hr-share" under KNOWLEDGE_ROOT'


def test_agent_b_same_named_collection_never_indexes_agent_a_files(knowledge_root):
    a, _ = create_agent(agent_id="agent-a")
    b, _ = create_agent(agent_id="agent-b")
    knowledge_root("agent-a", "handbook", SECRET_A)
    mine = create_collection(agent=a, name="handbook", folder="handbook")
    assert build_collection(collection=mine).status == BuildRun.SUCCEEDED
    # B cannot name A's folder: it is not among B's folders, so it is refused at creation ...
    with pytest.raises(Conflict, match='agent "agent-b" has no folder "handbook"'):
        create_collection(agent=b, name="handbook", folder="handbook")
    # ... and a same-named collection of B's with no folder has nothing to build from.
    theirs = create_collection(agent=b, name="handbook")
    with pytest.raises(Conflict, match="has no documents"):
        build_collection(collection=theirs)
    knowledge_root("agent-b", "handbook", PUBLIC_B)
    theirs.folder = "handbook"
    theirs.save()
    assert build_collection(collection=theirs).status == BuildRun.SUCCEEDED
    assert "canteen" in texts(theirs) and "band seven" not in texts(theirs)
    assert "band seven" in texts(mine) and "canteen" not in texts(mine)


def test_the_agent_less_variable_applies_only_while_one_agent_has_the_name(knowledge_root, tmp_path, monkeypatch):
    shared = tmp_path / "shared-secret-folder"
    shared.mkdir()
    (shared / "pay.md").write_text(SECRET_A["pay.md"])
    monkeypatch.setenv("KNOWLEDGE_HANDBOOK_FOLDER", str(shared))
    a, _ = create_agent(agent_id="agent-a")
    mine = create_collection(agent=a, name="handbook")
    assert build_collection(collection=mine).status == BuildRun.SUCCEEDED  # the demo's old way still works
    b, _ = create_agent(agent_id="agent-b")
    theirs = create_collection(agent=b, name="handbook")
    with pytest.raises(Conflict) as refused:
        request_build(collection=theirs, enqueue=False)
    message = refused.value.message
    assert refused.value.status == 409 and refused.value.code == "ambiguous_source"
    assert "KNOWLEDGE_AGENT_B__HANDBOOK_FOLDER" in message and str(tmp_path) not in message
    assert not Paragraph.objects.filter(collection=theirs).exists()
    # The agent-qualified variable wins for each agent.
    own = tmp_path / "b-folder"
    own.mkdir()
    (own / "hello.md").write_text(PUBLIC_B["hello.md"])
    monkeypatch.setenv("KNOWLEDGE_AGENT_B__HANDBOOK_FOLDER", str(own))
    assert build_collection(collection=theirs).status == BuildRun.SUCCEEDED
    assert "canteen" in texts(theirs) and "band seven" not in texts(theirs)
    assert source_folder(theirs).origin == "KNOWLEDGE_AGENT_B__HANDBOOK_FOLDER"


def test_the_agent_variable_wins_over_the_folder_under_the_root(agent, knowledge_root, tmp_path, monkeypatch):
    knowledge_root("alpha", "hr-share", SECRET_A)
    collection = create_collection(agent=agent, name="handbook", folder="hr-share")
    override = tmp_path / "override"
    override.mkdir()
    (override / "hello.md").write_text(PUBLIC_B["hello.md"])
    monkeypatch.setenv("KNOWLEDGE_ALPHA__HANDBOOK_FOLDER", str(override))
    build_collection(collection=collection)
    assert "canteen" in texts(collection) and "band seven" not in texts(collection)


@pytest.mark.parametrize("folder", ["../agent-a", "..", ".", "/etc", "a/b", "a\\b", ".hidden", " padded", "x" * 101,
                                    "nul\x00byte", "line\nbreak"])
def test_a_folder_is_one_name_never_a_path(agent, folder):
    with pytest.raises(RagsiteError) as refused:
        create_collection(agent=agent, name="handbook", folder=folder)
    assert refused.value.code == "invalid_folder"


def test_a_link_leaving_the_agents_folder_is_refused_by_name(knowledge_root, tmp_path):
    a, _ = create_agent(agent_id="agent-a")
    b, _ = create_agent(agent_id="agent-b")
    victim = knowledge_root("agent-a", "payroll", SECRET_A)
    knowledge_root("agent-b", "menu", PUBLIC_B)
    (knowledge_root.root / "agent-b" / "sneaky").symlink_to(victim, target_is_directory=True)
    # Not offered, not accepted at creation ...
    assert available_folders(b) == ["menu"]
    with pytest.raises(Conflict, match='no folder "sneaky"'):
        create_collection(agent=b, name="stolen", folder="sneaky")
    # ... and a folder that becomes such a link after it was chosen is refused when built.
    collection = create_collection(agent=b, name="stolen", folder="menu")
    run = request_build(collection=collection, enqueue=False)
    menu = knowledge_root.root / "agent-b" / "menu"
    for path in menu.iterdir():
        path.unlink()
    menu.rmdir()
    menu.symlink_to(victim, target_is_directory=True)
    run = run_build(run.pk)
    assert run.status == BuildRun.FAILED
    assert 'folder "menu"' in run.error and "leaves agent \"agent-b\"'s folder" in run.error
    assert str(tmp_path) not in run.error
    assert not Paragraph.objects.filter(collection=collection).exists()
    with pytest.raises(Conflict, match="leaves"):
        request_build(collection=collection, enqueue=False)


def test_a_missing_folder_is_refused_at_request_time_naming_the_collection_not_a_path(agent, knowledge_root,
                                                                                      tmp_path):
    knowledge_root("alpha", "hr-share", SECRET_A)
    collection = create_collection(agent=agent, name="handbook", folder="hr-share")
    (knowledge_root.root / "alpha" / "hr-share" / "pay.md").unlink()
    (knowledge_root.root / "alpha" / "hr-share").rmdir()
    with pytest.raises(Conflict) as refused:
        request_build(collection=collection, enqueue=False)
    assert refused.value.status == 409 and 'collection "handbook"' in refused.value.message
    assert str(tmp_path) not in refused.value.message
    assert not BuildRun.objects.filter(collection=collection).exists()


def test_hidden_and_non_folder_entries_are_not_offered(agent, knowledge_root):
    knowledge_root("alpha", "visible", SECRET_A)
    knowledge_root("alpha", ".git", SECRET_A)
    (knowledge_root.root / "alpha" / "loose-file.md").write_text("not a folder")
    assert available_folders(agent) == ["visible"]
