"""Where a collection's documents live: KNOWLEDGE_ROOT/<agent>/<folder>, the overrides, and what is
refused."""

import io
import json

import pytest
from django.core.management import CommandError, call_command
from django.db import IntegrityError, transaction

from collections_app.models import BuildRun, Collection, Paragraph
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection, request_build, run_build
from collections_app.services.knowledge import (
    available_folders,
    bind_folder_variable,
    describe_source,
    source_folder,
)
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


def shared_folder(tmp_path, monkeypatch, name: str, files: dict) -> None:
    folder = tmp_path / f"deployment-{name}"
    folder.mkdir()
    for file, text in files.items():
        (folder / file).write_text(text)
    monkeypatch.setenv(f"KNOWLEDGE_{name.upper()}_FOLDER", str(folder))


def api(client, raw):
    def call(method, path, body=None):
        return getattr(client, method)(
            f"/api/v1{path}",
            data=json.dumps(body or {}),
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {raw}",
        )

    return call


def test_the_agent_less_variable_serves_only_the_collection_staff_bound(
    client, tmp_path, monkeypatch, django_capture_on_commit_callbacks
):
    """Through the API, so on PostgreSQL each agent's requests run under row-level security."""
    shared_folder(tmp_path, monkeypatch, "legacy", {"door.md": "# Legacy\n\nAgent A's door code is 5150.\n"})
    shared_folder(tmp_path, monkeypatch, "unclaimed", {"u.md": "# Unclaimed\n\nThe secret is 8086.\n"})
    a, a_key = create_agent(agent_id="agent-a")
    b, b_key = create_agent(agent_id="agent-b")
    as_a, as_b = api(client, a_key), api(client, b_key)
    assert as_a("post", "/collections", {"name": "legacy"}).status_code == 201
    # Creating the name is not a claim: unbound, A's collection has no documents either.
    assert as_a("post", "/collections/legacy/build").json()["error"]["code"] == "no_source"
    call_command("bind_folder", "agent-a", "legacy", stdout=io.StringIO())
    with django_capture_on_commit_callbacks(execute=True):
        assert as_a("post", "/collections/legacy/build").status_code == 202

    answers = {}
    for name in ("legacy", "unclaimed", "made-up"):
        assert as_b("post", "/collections", {"name": name}).status_code == 201
        with django_capture_on_commit_callbacks(execute=True):
            answers[name] = as_b("post", f"/collections/{name}/build")
    # B reads neither A's folder nor the unclaimed one, and each refusal reads like one for a made-up name.
    for name, answer in answers.items():
        assert answer.status_code == 409 and answer.json()["error"]["code"] == "no_source", answer.content
        said = answer.content.decode()
        assert said.replace(name, "NAME").replace(name.upper().replace("-", "_"), "NAME") == (
            answers["made-up"].content.decode().replace("made-up", "NAME").replace("MADE_UP", "NAME")
        )
        assert "agents" not in said and f"KNOWLEDGE_{name.upper()}_FOLDER" not in said
    assert not Paragraph.objects.filter(collection__agent=b).exists()
    # A's builds are not blocked by B's same-named collection.
    with django_capture_on_commit_callbacks(execute=True):
        assert as_a("post", "/collections/legacy/build").status_code == 202
    mine = Collection.objects.get(agent=a, name="legacy")
    assert BuildRun.objects.filter(collection=mine, status=BuildRun.SUCCEEDED).count() == 2
    assert "5150" in texts(mine)
    # Staff cannot bind a second collection of the name: the database holds one binding per name.
    with pytest.raises(CommandError, match="already bound to agent-a/legacy"):
        call_command("bind_folder", "agent-b", "legacy", stdout=io.StringIO())
    theirs = Collection.objects.get(agent=b, name="legacy")
    theirs.folder_variable_bound = True
    with pytest.raises(IntegrityError), transaction.atomic():
        theirs.save()


def test_the_api_cannot_bind_the_agent_less_variable(client, tmp_path, monkeypatch):
    shared_folder(tmp_path, monkeypatch, "legacy", {"door.md": "# Legacy\n\nThe door code is 5150.\n"})
    _, key = create_agent(agent_id="agent-b")
    made = api(client, key)("post", "/collections", {"name": "legacy", "folder_variable_bound": True})
    # Refused, not ignored.
    assert made.status_code == 422 and made.json()["error"]["code"] == "unknown_fields"
    assert not Collection.objects.filter(name="legacy").exists()


def test_an_agent_qualified_variable_needs_no_binding(tmp_path, monkeypatch):
    a, _ = create_agent(agent_id="agent-a")
    b, _ = create_agent(agent_id="agent-b")
    shared_folder(tmp_path, monkeypatch, "handbook", SECRET_A)
    mine = create_collection(agent=a, name="handbook")
    bind_folder_variable(collection=mine)
    assert build_collection(collection=mine).status == BuildRun.SUCCEEDED
    # The agent-qualified variable wins for each agent, bound or not.
    own = tmp_path / "b-folder"
    own.mkdir()
    (own / "hello.md").write_text(PUBLIC_B["hello.md"])
    monkeypatch.setenv("KNOWLEDGE_AGENT_B__HANDBOOK_FOLDER", str(own))
    theirs = create_collection(agent=b, name="handbook")
    assert build_collection(collection=theirs).status == BuildRun.SUCCEEDED
    assert "canteen" in texts(theirs) and "band seven" not in texts(theirs)
    assert source_folder(theirs).origin == "KNOWLEDGE_AGENT_B__HANDBOOK_FOLDER"
    assert source_folder(mine).origin == "KNOWLEDGE_HANDBOOK_FOLDER"
    # Unbinding takes the variable back at once.
    bind_folder_variable(collection=mine, bound=False)
    with pytest.raises(Conflict, match="has no documents"):
        request_build(collection=mine, enqueue=False)


def test_the_agent_variable_wins_over_the_folder_under_the_root(agent, knowledge_root, tmp_path, monkeypatch):
    knowledge_root("alpha", "hr-share", SECRET_A)
    collection = create_collection(agent=agent, name="handbook", folder="hr-share")
    override = tmp_path / "override"
    override.mkdir()
    (override / "hello.md").write_text(PUBLIC_B["hello.md"])
    monkeypatch.setenv("KNOWLEDGE_ALPHA__HANDBOOK_FOLDER", str(override))
    build_collection(collection=collection)
    assert "canteen" in texts(collection) and "band seven" not in texts(collection)


@pytest.mark.parametrize(
    "folder",
    [
        "../agent-a",
        "..",
        ".",
        "/etc",
        "a/b",
        "a\\b",
        ".hidden",
        " padded",
        "x" * 101,
        "nul\x00byte",
        "line\nbreak",
    ],
)
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
    assert 'folder "menu"' in run.error and 'leaves agent "agent-b"\'s folder' in run.error
    assert str(tmp_path) not in run.error
    assert not Paragraph.objects.filter(collection=collection).exists()
    with pytest.raises(Conflict, match="leaves"):
        request_build(collection=collection, enqueue=False)


def test_a_missing_folder_is_refused_at_request_time_naming_the_collection_not_a_path(
    agent, knowledge_root, tmp_path
):
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
