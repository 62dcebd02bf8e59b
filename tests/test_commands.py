"""The set-up commands: what they print, and how they refuse bad input."""

import pytest
from django.core.management import CommandError, call_command

from collections_app.models import ApiKey, Collection, Reader
from collections_app.services.agents import authenticate

pytestmark = pytest.mark.django_db


def run(*args) -> tuple[str, str]:
    from io import StringIO

    out, err = StringIO(), StringIO()
    call_command(*args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def test_create_agent_prints_a_working_key_alone_on_its_last_line():
    out, _err = run("create_agent", "helpdesk", "--name", "Help desk")
    key = out.strip().splitlines()[-1]
    assert key.startswith("rsk_") and " " not in key
    assert authenticate(key).agent.agent_id == "helpdesk"
    # Only the hash is stored.
    assert not ApiKey.objects.filter(hashed=key).exists()
    assert key not in str(list(ApiKey.objects.values()))


def test_create_agent_refuses_a_duplicate_with_a_nonzero_exit():
    run("create_agent", "helpdesk")
    with pytest.raises(CommandError, match='agent "helpdesk" already exists') as raised:
        run("create_agent", "helpdesk")
    assert raised.value.returncode != 0


def test_create_agent_refuses_a_malformed_id():
    with pytest.raises(CommandError, match="agent id must be"):
        run("create_agent", "has spaces/and slashes")


def test_create_collection_for_a_known_agent():
    run("create_agent", "helpdesk")
    out, _ = run(
        "create_collection",
        "helpdesk",
        "handbook",
        "--method",
        "fixed",
        "--built-from",
        "the HR share",
        "--per-reader",
    )
    collection = Collection.objects.get(name="handbook")
    assert (collection.method, collection.built_from, collection.per_reader) == (
        "fixed",
        "the HR share",
        True,
    )
    assert "handbook" in out


def test_create_collection_names_a_folder_of_its_agent_under_the_root(knowledge_root):
    run("create_agent", "helpdesk")
    knowledge_root("helpdesk", "hr-share", {"leave.md": "# Leave\n\nCarry-over is capped at five days.\n"})
    run("create_collection", "helpdesk", "handbook", "--folder", "hr-share")
    assert Collection.objects.get(name="handbook").folder == "hr-share"
    out, _ = run("build_collection", "helpdesk", "handbook", "--sync")
    assert out.startswith("Built handbook: 1 paragraphs")
    with pytest.raises(
        CommandError, match='has no folder "elsewhere" under KNOWLEDGE_ROOT; available: hr-share'
    ):
        run("create_collection", "helpdesk", "other", "--folder", "elsewhere")
    with pytest.raises(CommandError, match="not a path"):
        run("create_collection", "helpdesk", "other", "--folder", "../demo")


def test_create_collection_refuses_an_unknown_agent():
    with pytest.raises(CommandError, match='no agent "ghost"'):
        run("create_collection", "ghost", "handbook")


def test_create_collection_refuses_a_duplicate_name():
    run("create_agent", "helpdesk")
    run("create_collection", "helpdesk", "handbook")
    with pytest.raises(CommandError, match='already has a collection "handbook"'):
        run("create_collection", "helpdesk", "handbook")


def test_create_collection_refuses_an_unknown_method_listing_the_available_ones():
    run("create_agent", "helpdesk")
    with pytest.raises(CommandError, match="available: fixed, structure, tokens, window"):
        run("create_collection", "helpdesk", "handbook", "--method", "magic")


def test_create_collection_refuses_a_planned_method():
    run("create_agent", "helpdesk")
    with pytest.raises(CommandError, match="semantic"):
        run("create_collection", "helpdesk", "handbook", "--method", "semantic")


def test_create_reader_with_labels():
    out, _ = run("create_reader", "alice@example.com", "--label", "hr", "--label", "finance")
    reader = Reader.objects.get(external_id="alice@example.com")
    assert sorted(reader.labels.values_list("name", flat=True)) == ["finance", "hr"]
    assert "alice@example.com" in out


def test_create_reader_refuses_a_duplicate_and_a_bad_label():
    run("create_reader", "alice")
    with pytest.raises(CommandError, match='reader "alice" already exists'):
        run("create_reader", "alice")
    with pytest.raises(CommandError, match="label must be"):
        run("create_reader", "bob", "--label", "no spaces allowed")
