"""One folder variable names one agent's collection: ids and names that would share
KNOWLEDGE_<AGENT>__<COLLECTION>_FOLDER are refused at creation, reported at start, and a variable that
could be another's is never read."""

import pytest
from django.core.checks import run_checks

from collections_app import conf
from collections_app.checks import check_folder_variables
from collections_app.models import Agent, Collection
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from collections_app.services.knowledge import bind_folder_variable, source_folder
from collections_app.services.search import search_collection
from ragsite.errors import RagsiteError

pytestmark = pytest.mark.django_db

SECRET = {"vault.md": "# Vault\n\nThe door code of the vault is 5150.\n"}


@pytest.mark.parametrize(
    "first, second",
    [("agent-a", "agent_a"), ("agent-a", "Agent-A"), ("agent_a", "AGENT-A"), ("hr", "HR")],
)
def test_an_agent_id_spelling_anothers_variables_is_refused(first, second):
    create_agent(agent_id=first)
    with pytest.raises(RagsiteError) as refused:
        create_agent(agent_id=second)
    assert refused.value.code == "variable_taken" and first in refused.value.message


@pytest.mark.parametrize("agent_id", ["acme--x", "acme__x", "a-_b", "acme-", "acme_"])
def test_an_agent_id_that_could_run_into_the_separator_is_refused(agent_id):
    with pytest.raises(RagsiteError) as refused:
        create_agent(agent_id=agent_id)
    assert refused.value.code == "variable_taken"
    assert not Agent.objects.filter(agent_id=agent_id).exists()


def test_one_agents_collections_cannot_share_a_variable():
    agent, _ = create_agent(agent_id="acme")
    create_collection(agent=agent, name="my-docs")
    with pytest.raises(RagsiteError) as refused:
        create_collection(agent=agent, name="my_docs")
    assert refused.value.code == "variable_taken"
    other, _ = create_agent(agent_id="beta")
    create_collection(agent=other, name="my_docs")  # another agent's names are its own


@pytest.fixture
def vault_folder(tmp_path, monkeypatch):
    def make(variable):
        folder = tmp_path / variable
        folder.mkdir()
        (folder / "vault.md").write_text(SECRET["vault.md"])
        monkeypatch.setenv(variable, str(folder))
        return folder

    return make


@pytest.mark.parametrize(
    "owner, owner_collection, intruder, intruder_collection",
    [
        ("agent-a", "vault", "agent_a", "vault"),
        ("agent-a", "vault", "Agent-A", "vault"),
        ("acme--x", "payroll", "acme", "x--payroll"),
        ("acme--x", "payroll", "acme", "x__payroll"),
    ],
)
def test_a_store_made_before_the_rule_never_reads_a_shared_variable(
    vault_folder, owner, owner_collection, intruder, intruder_collection
):
    # Both agents exist, as they could before creation refused them.
    owner_agent = Agent.objects.create(agent_id=owner)
    intruder_agent = Agent.objects.create(agent_id=intruder)
    variable = conf.folder_variable(owner_collection, owner)
    assert variable == conf.folder_variable(intruder_collection, intruder)  # the collision itself
    vault_folder(variable)
    for agent, name in ((intruder_agent, intruder_collection), (owner_agent, owner_collection)):
        collection = Collection.objects.create(agent=agent, name=name, method="fixed", size=80)
        with pytest.raises(RagsiteError) as refused:
            source_folder(collection)
        assert refused.value.code == "ambiguous_source" and variable in refused.value.message
        with pytest.raises(RagsiteError) as unbuilt:
            build_collection(collection=collection)
        assert unbuilt.value.code == "ambiguous_source"
        with pytest.raises(RagsiteError):
            search_collection(agent=agent, collection=name, question="door code", min_score=0)
    warnings = check_folder_variables(databases=["default"])
    assert warnings and all(w.id == "collections.W010" for w in warnings)
    assert any(owner in w.msg or intruder in w.msg for w in warnings)


def test_a_variable_of_one_agent_alone_keeps_working(vault_folder):
    agent, _ = create_agent(agent_id="agent-a")
    create_agent(agent_id="agent-b")
    folder = vault_folder("KNOWLEDGE_AGENT_A__VAULT_FOLDER")
    collection = create_collection(agent=agent, name="vault", method="fixed", size=80)
    assert source_folder(collection).path == folder
    assert build_collection(collection=collection).status == "succeeded"
    answer = search_collection(agent=agent, collection="vault", question="door code", min_score=0)
    assert "5150" in answer["paragraphs"][0]["text"]
    assert check_folder_variables(databases=["default"]) == []
    assert not [m for m in run_checks() if m.id == "collections.W010"]


def test_a_bound_variable_that_reads_like_an_agents_is_refused():
    agent, _ = create_agent(agent_id="zz")
    collection = create_collection(agent=agent, name="hr--handbook")
    with pytest.raises(RagsiteError) as refused:
        bind_folder_variable(collection=collection)
    assert refused.value.code == "already_bound" and "agent-qualified" in refused.value.message
    plain = create_collection(agent=agent, name="my-docs")
    bind_folder_variable(collection=plain)
    other, _ = create_agent(agent_id="yy")
    twin = create_collection(agent=other, name="my_docs")
    with pytest.raises(RagsiteError):
        bind_folder_variable(collection=twin)  # KNOWLEDGE_MY_DOCS_FOLDER is my-docs' already
