"""Filters before ranking: document attributes from sidecars, and a filtered search answering exactly as a
twin collection holding only the kept documents does (texts, scores, ids, order, where runs stop)."""

import json

import pytest

from collections_app.models import Document
from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from ragsite.errors import RagsiteError
from tests.conftest import HANDBOOK

EXTRA = {
    "expenses.md": "# Expenses\n\nLeave travel and hotel costs are claimed within thirty days.\n\n"
    "Receipts for annual leave travel are kept for five years.\n\n## Hotels\n\nHotels are booked at "
    "the standard rate; leave days spent travelling count as work.\n\n## Meals\n\nMeals are capped at "
    "forty a day.\n",
}
SIDECARS = {
    "leave.md.meta.json": json.dumps({"team": "hr", "year": 2024}),
    "security.md.meta.json": json.dumps({"team": "it", "year": 2023}),
    "travel.md.meta.json": json.dumps({"team": "finance", "year": 2022}),
    "expenses.md.meta.json": json.dumps({"team": "finance", "year": 2024}),
}
QUESTIONS = [
    "how many days of annual leave carry over",
    "hotel travel costs",
    "badges and laptops",
    "leave five days travel",
]
HR_OR_RECENT = {
    "type": "or",
    "filters": [
        {"type": "eq", "key": "team", "value": "hr"},
        {
            "type": "and",
            "filters": [
                {"type": "eq", "key": "team", "value": "finance"},
                {"type": "gte", "key": "year", "value": 2024},
            ],
        },
    ],
}


@pytest.fixture
def agent(db):
    return create_agent(agent_id="alpha", name="Alpha")[0]


def built(agent, knowledge_folder, name, files, **kwargs):
    kwargs = {"method": "fixed", "size": 80, **kwargs}
    collection = create_collection(agent=agent, name=name, **kwargs)
    knowledge_folder(name, files)
    run = build_collection(collection=collection)
    assert run.status == "succeeded", run.error
    return collection, run


def ask(agent, collection, question, **kwargs):
    return search_collection(
        agent=agent,
        collection=collection,
        question=question,
        **{"min_score": 0, "most": 50, "around": 1, **kwargs},
    )


def test_sidecars_give_documents_their_attributes_and_are_not_documents(agent, knowledge_folder):
    collection, run = built(agent, knowledge_folder, "full", {**HANDBOOK, **EXTRA, **SIDECARS})
    attributes = dict(Document.objects.filter(collection=collection).values_list("name", "attributes"))
    assert attributes == {
        "leave.md": {"team": "hr", "year": 2024},
        "security.md": {"team": "it", "year": 2023},
        "travel.md": {"team": "finance", "year": 2022},
        "expenses.md": {"team": "finance", "year": 2024},
    }
    assert not any(w for w in run.warnings if "meta.json" in w)


@pytest.mark.parametrize(
    "sidecar, why",
    [
        ("{not json", "not taken"),
        (json.dumps({"section": "x"}), "paragraph's own"),
        (json.dumps({"flag": True}), "strings and numbers"),
        (json.dumps(["hr"]), "JSON object"),
    ],
)
def test_a_bad_sidecar_leaves_its_document_without_attributes_and_says_so(
    agent, knowledge_folder, sidecar, why
):
    collection, run = built(agent, knowledge_folder, "full", {**HANDBOOK, "leave.md.meta.json": sidecar})
    assert Document.objects.get(collection=collection, name="leave.md").attributes == {}
    told = [w for w in run.warnings if "leave.md.meta.json" in w]
    assert told and why in told[0] and "deployment-secret" not in told[0]  # the name, never the path
    assert Document.objects.filter(collection=collection).count() == 3


@pytest.mark.parametrize("question", QUESTIONS)
@pytest.mark.parametrize("per_reader", [False, True])
def test_a_filtered_search_answers_as_a_twin_holding_only_the_kept_documents(
    agent, knowledge_folder, question, per_reader
):
    full, _ = built(agent, knowledge_folder, "full", {**HANDBOOK, **EXTRA, **SIDECARS}, per_reader=per_reader)
    kept = {"leave.md": HANDBOOK["leave.md"], "expenses.md": EXTRA["expenses.md"]}
    twin, _ = built(agent, knowledge_folder, "twin", kept, per_reader=per_reader)
    reader = {"reader": "anyone"} if per_reader else {}
    filtered = ask(agent, full, question, filters=HR_OR_RECENT, **reader)
    alone = ask(agent, twin, question, **reader)
    assert filtered["paragraphs"] == alone["paragraphs"] and filtered["paragraphs"]
    assert (filtered["mode"], filtered["floor"]) == (alone["mode"], alone["floor"])
    unfiltered = ask(agent, full, question, **reader)
    assert {p["document"] for p in unfiltered["paragraphs"]} - set(kept)  # the filter did hide something


def test_document_and_section_filters_keep_runs_from_closing_over_what_they_hide(agent, knowledge_folder):
    # By structure, expenses.md is three paragraphs: Expenses, Hotels, Meals.
    full, _ = built(
        agent, knowledge_folder, "full", {**HANDBOOK, **EXTRA, **SIDECARS}, method="structure", size=None
    )
    only = ask(
        agent, full, "hotel travel costs", filters={"type": "eq", "key": "document", "value": "expenses.md"}
    )
    assert {p["document"] for p in only["paragraphs"]} == {"expenses.md"}
    no_hotels = ask(
        agent,
        full,
        "hotel travel costs",
        around=3,
        filters={
            "type": "and",
            "filters": [
                {"type": "eq", "key": "document", "value": "expenses.md"},
                {"type": "ne", "key": "section", "value": "Hotels"},
            ],
        },
    )
    # As in a collection without Hotels, Expenses and Meals are neighbours: one run, Hotels' text not in it
    # (docs/security.md: no run stops where a hidden paragraph sits).
    assert sorted(p["chunk_ids"] for p in no_hotels["paragraphs"]) == [["expenses.md#0", "expenses.md#2"]]
    assert all("Hotels are booked" not in p["text"] for p in no_hotels["paragraphs"])
    unfiltered = ask(
        agent,
        full,
        "hotel travel costs",
        around=3,
        filters={"type": "eq", "key": "document", "value": "expenses.md"},
    )
    assert [p["chunk_ids"] for p in unfiltered["paragraphs"]] == [
        ["expenses.md#0", "expenses.md#1", "expenses.md#2"]
    ]


@pytest.mark.parametrize(
    "filters, message",
    [
        ({"type": "eq", "key": "team"}, "filters.value is required"),
        (
            {"type": "and", "filters": [{"type": "regex", "key": "a", "value": "b"}]},
            "filters.filters[0].type",
        ),
        ({"type": "eq", "key": "page", "value": 2}, "no page numbers"),
    ],
)
def test_a_bad_filter_is_a_clear_400_before_anything_is_searched(agent, knowledge_folder, filters, message):
    full, _ = built(agent, knowledge_folder, "full", {**HANDBOOK, **SIDECARS})
    with pytest.raises(RagsiteError) as raised:
        ask(agent, full, "leave", filters=filters)
    assert raised.value.code == "invalid_filters" and raised.value.status == 400
    assert message in raised.value.message


def test_filters_through_the_api_and_mcp(client, db, knowledge_folder):
    agent, raw = create_agent(agent_id="alpha", name="Alpha")
    built(agent, knowledge_folder, "full", {**HANDBOOK, **EXTRA, **SIDECARS})
    headers = {"Authorization": f"Bearer {raw}"}
    body = {
        "question": "travel",
        "min_score": 0,
        "most": 50,
        "filters": {"type": "eq", "key": "team", "value": "finance"},
    }
    answer = client.post(
        "/api/v1/collections/full/search",
        data=json.dumps(body),
        content_type="application/json",
        headers=headers,
    ).json()
    assert {p["document"] for p in answer["paragraphs"]} == {"travel.md", "expenses.md"}
    bad = client.post(
        "/api/v1/collections/full/search",
        content_type="application/json",
        headers=headers,
        data=json.dumps({**body, "filters": {"type": "gt", "key": "year", "value": "x"}}),
    )
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_filters"
    from tests.collections.test_mcp import call_tool

    result = call_tool(
        client,
        raw,
        "search",
        {
            "collection": "full",
            "question": "travel",
            "min_score": 0,
            "filters": {"type": "in", "key": "year", "value": [2022]},
        },
    )
    assert {p["document"] for p in result["structuredContent"]["paragraphs"]} == {"travel.md"}
    store = client.post(
        "/v1/vector_stores/full/search",
        content_type="application/json",
        headers=headers,
        data=json.dumps(
            {
                "query": "travel",
                "filters": {"type": "eq", "key": "team", "value": "hr"},
                "ranking_options": {"score_threshold": 0},
            }
        ),
    ).json()
    assert {r["filename"] for r in store["data"]} == {"leave.md"}
    assert store["data"][0]["attributes"]["team"] == "hr" and store["data"][0]["attributes"]["year"] == 2024


def test_a_sidecar_is_not_a_file_the_build_or_the_sync_check_lists(tmp_path):
    from collections_app.services.sources import folder_entries

    (tmp_path / "leave.md").write_text(HANDBOOK["leave.md"])
    (tmp_path / "leave.md.meta.json").write_text(SIDECARS["leave.md.meta.json"])
    assert [entry.name for entry in folder_entries(tmp_path)] == ["leave.md"]


def test_a_synced_folder_rebuilds_when_only_a_sidecar_changes(
    agent, knowledge_folder, django_capture_on_commit_callbacks
):
    from collections_app.services import sync, sync_check

    folder = knowledge_folder("synced", {**HANDBOOK, "leave.md.meta.json": SIDECARS["leave.md.meta.json"]})
    collection = create_collection(agent=agent, name="synced", method="fixed", size=80)
    sync.set_sync(collection=collection, every=5)

    def check():
        with django_capture_on_commit_callbacks(execute=True):
            return sync_check.check_source(collection=collection)

    def hr_documents():
        answer = ask(agent, collection, "leave days", filters={"type": "eq", "key": "team", "value": "hr"})
        return {p["document"] for p in answer["paragraphs"]}

    assert check().build is not None and hr_documents() == {"leave.md"}
    unchanged = check()
    assert unchanged.outcome == "unchanged" and unchanged.fingerprinted == 0  # the sidecar is not read again
    (folder / "leave.md.meta.json").write_text(json.dumps({"team": "legal"}))
    (folder / "travel.md.meta.json").write_text(json.dumps({"team": "hr"}))
    found = check()
    assert found.changed == ["leave.md", "travel.md"] and found.new == [] and found.build is not None
    assert hr_documents() == {"travel.md"}
    (folder / "travel.md.meta.json").unlink()
    assert check().changed == ["travel.md"] and hr_documents() == set()
    assert check().outcome == "unchanged"
