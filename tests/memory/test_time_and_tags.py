"""Records' tags and validity, recall's filters (before ranking, under the twin rule, never across
agents), newer statements superseding older ones, and the analyzer of recall's keyword leg — over the
API and MCP, on SQLite and PostgreSQL (DATABASE_URL)."""

import json
import random
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import IntegrityError, transaction

from collections_app.services.agents import create_agent
from memory_app.models import MAX_TAGS, Episode, Memory
from memory_app.schemas import RecallOut
from memory_app.services import recall
from memory_app.services.records import export_records, import_records
from ragsite.embedders import NoneEmbedder
from ragsite.errors import RagsiteError
from ragsite.slots import restated, statement
from tests.collections.test_mcp import call_tool, tool_error
from tests.declared import assert_declared

from .conftest import WORDS, prose

pytestmark = pytest.mark.django_db

BASE = "/api/v1/memory"


@pytest.fixture
def keyed(client, django_capture_on_commit_callbacks):
    """(agent, raw key, api(method, path, body)) for the agent "timed"; queued tasks run on commit."""
    agent, raw = create_agent(agent_id="timed")

    def api(method, path, body=None, key=raw):
        headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
        with django_capture_on_commit_callbacks(execute=True):
            if method in ("get", "delete"):
                return getattr(client, method)(BASE + path, body or {}, **headers)
            return getattr(client, method)(BASE + path, body, content_type="application/json", **headers)

    return agent, raw, api


def _records() -> int:
    return Memory.objects.count() + Episode.objects.count()


# --- Records: tags and validity ------------------------------------------------------------


def test_a_record_keeps_its_tags_and_validity_through_the_api_and_mcp(client, keyed):
    agent, raw, api = keyed
    stored = api(
        "post",
        "/memories",
        {
            "text": "I live in Porto.",
            "tags": ["home", " city ", "home"],
            "valid_from": "2024-03-01T00:00:00+02:00",
            "valid_until": "2026-01-01",
        },
    )
    assert stored.status_code == 201, stored.content
    record = api("get", f"/records/mem/{stored.json()['id']}").json()
    assert record["tags"] == ["home", "city"]  # trimmed, repeats dropped, order kept
    assert record["valid_from"] == "2024-02-29T22:00:00Z"
    assert record["valid_until"] == "2026-01-01T00:00:00Z"
    listed = api("get", "/memories").json()["records"][0]
    assert (listed["tags"], listed["valid_from"], listed["valid_until"]) == (
        ["home", "city"],
        "2024-02-29T22:00:00Z",
        "2026-01-01T00:00:00Z",
    )
    # MCP: the same fields in, the same record out.
    result = call_tool(client, raw, "store", {"text": "A trip to Faro.", "kind": "ep", "tags": ["travel"]})
    assert result.get("isError") is not True, result
    episode = result["structuredContent"]
    read = call_tool(client, raw, "read_record", {"kind": "ep", "id": episode["id"]})["structuredContent"]
    assert read["tags"] == ["travel"] and read["valid_from"] is None and read["valid_until"] is None
    listed = call_tool(client, raw, "list_records", {"kind": "ep"})["structuredContent"]["records"]
    assert listed[0]["tags"] == ["travel"]
    # A record stored without them has none.
    plain = api("post", "/memories", {"text": "no tags here"}).json()
    assert api("get", f"/records/mem/{plain['id']}").json()["tags"] == []


BAD_RECORDS = [
    ({"tags": "home"}, None),
    ({"tags": ["x"] * (MAX_TAGS + 1)}, None),
    ({"tags": [f"t{i}" for i in range(MAX_TAGS + 1)]}, None),
    ({"tags": ["x" * 65]}, None),
    ({"tags": [""]}, None),
    ({"tags": ["   "]}, "invalid_tags"),
    ({"tags": ["tab\there"]}, "invalid_tags"),
    ({"tags": [7]}, None),
    ({"valid_from": "2026-02-30T00:00:00"}, "invalid_valid_from"),
    ({"valid_from": "yesterday"}, "invalid_valid_from"),
    ({"valid_from": 1e20}, None),
    ({"valid_from": 1700000000}, None),
    ({"valid_until": "9999-12-31T23:59:59-14:00"}, "invalid_valid_until"),
    ({"valid_until": "12026-01-01T00:00:00"}, "invalid_valid_until"),
    ({"valid_from": "2026-01-02T00:00:00Z", "valid_until": "2026-01-01T00:00:00Z"}, "invalid_validity"),
    ({"valid_from": "2026-01-01T00:00:00Z", "valid_until": "2026-01-01T01:00:00+01:00"}, "invalid_validity"),
]


@pytest.mark.parametrize("extra, code", BAD_RECORDS)
def test_a_bad_tag_or_time_is_a_400_and_nothing_is_written(client, keyed, extra, code):
    _agent, raw, api = keyed
    before = _records()
    for path in ("/memories", "/episodes"):
        response = api("post", path, {"text": "a fact", **extra})
        assert response.status_code == 400, response.content
        error = response.json()["error"]
        assert error["code"] in (code, "invalid_request"), error
        assert any(name in error["message"] for name in extra), error
    # MCP: a tool error naming the argument, nothing stored either.
    for kind in ("mem", "ep"):
        error = tool_error(call_tool(client, raw, "store", {"text": "a fact", "kind": kind, **extra}))
        assert error["code"] in ("invalid_arguments", code), error
        assert any(name in error["message"] for name in extra), error
    assert _records() == before


def test_the_database_refuses_a_validity_that_ends_before_it_starts(keyed):
    agent, _raw, _api = keyed
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    with pytest.raises(IntegrityError), transaction.atomic():
        Memory.objects.create(agent=agent, text="x", valid_from=moment, valid_until=moment)
    assert not Memory.objects.filter(agent=agent).exists()


def test_export_and_import_carry_tags_and_validity(keyed):
    agent, _raw, api = keyed
    api("post", "/memories", {"text": "tagged", "tags": ["a", "b"], "valid_until": "2030-01-01T00:00:00Z"})
    api("post", "/episodes", {"text": "plain"})
    lines = [json.dumps(item) for item in export_records(agent=agent)]
    assert json.loads(lines[0])["tags"] == ["a", "b"] and "tags" not in json.loads(lines[1])
    other, _ = create_agent(agent_id="copy")
    import_records(agent=other, lines=lines)
    copied = Memory.objects.get(agent=other)
    assert copied.tags == ["a", "b"] and copied.valid_until == datetime(2030, 1, 1, tzinfo=UTC)
    assert copied.valid_from is None
    bad = json.dumps({"kind": "mem", "text": "x", "tags": ["y" * 65]})
    with pytest.raises(RagsiteError, match="line 2"):
        import_records(agent=other, lines=[lines[1], bad])
    # All or nothing: the good line before the bad one was not imported either.
    assert (Memory.objects.filter(agent=other).count(), Episode.objects.filter(agent=other).count()) == (1, 1)


# --- Recall's filters ----------------------------------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _line(kind, text, day, tags=(), valid=(None, None)):
    item = {"kind": kind, "text": text, "created_at": (T0 + timedelta(days=day)).isoformat()}
    if tags:
        item["tags"] = list(tags)
    if valid[0] is not None:
        item["valid_from"] = (T0 + timedelta(days=valid[0])).isoformat()
    if valid[1] is not None:
        item["valid_until"] = (T0 + timedelta(days=valid[1])).isoformat()
    return item


def _store_lines(agent, items, run_on_commit):
    run_on_commit(import_records, agent=agent, lines=[json.dumps(item) for item in items])


def _corpus(seed=7, count=40):
    """Records of both kinds over 40 days, some long (divided into nodes), with tags and validities."""
    rng = random.Random(seed)
    items = []
    for i in range(count):
        kind = rng.choice(("mem", "ep"))
        text = prose(rng.choice((8, 14, 120)), seed=seed * 100 + i)
        tags = rng.sample(("work", "home", "travel", "health"), rng.randint(0, 2))
        start = rng.choice((None, rng.randint(0, 20)))
        end = rng.choice((None, (start or 0) + rng.randint(1, 30)))
        items.append(_line(kind, text, i, tags, (start, end)))
    return items


FILTERS = [
    {"kinds": ["mem"]},
    {"kinds": ["ep"]},
    {"kinds": ["ep", "mem"]},
    {"tags": ["work"]},
    {"tags": ["home", "travel"]},
    {"tags": ["nobody-uses-this"]},
    {"since": "2026-01-10T00:00:00Z"},
    {"until": "2026-01-20T00:00:00Z"},
    {"since": "2026-01-05T00:00:00Z", "until": "2026-01-25T12:00:00+02:00"},
    {"valid_at": "2026-01-15T00:00:00Z"},
    {"valid_at": "2026-03-01T00:00:00Z", "kinds": ["mem"], "tags": ["health"]},
    {"since": "2026-01-08", "tags": ["home"], "kinds": ["ep"]},
]


def _matches(item, filters) -> bool:
    def moment(value):
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)

    created = moment(item["created_at"])
    if "since" in filters and created < moment(filters["since"]):
        return False
    if "until" in filters and created >= moment(filters["until"]):
        return False
    if "valid_at" in filters:
        at = moment(filters["valid_at"])
        if "valid_from" in item and moment(item["valid_from"]) > at:
            return False
        if "valid_until" in item and moment(item["valid_until"]) <= at:
            return False
    if "kinds" in filters and item["kind"] not in filters["kinds"]:
        return False
    return all(tag in item.get("tags", ()) for tag in filters.get("tags", ()))


def _seen(answer, texts_of):
    """An answer with record ids replaced by their texts (a twin's ids differ)."""
    return [
        (
            e["kind"],
            texts_of[(e["kind"], e["id"])],
            e["score"],
            e["start"],
            e["end"],
            e["nodes"],
            e["cut"],
            None
            if e["superseded_by"] is None
            else texts_of[(e["superseded_by"]["kind"], e["superseded_by"]["id"])],
        )
        for e in answer["excerpts"]
    ] + [answer["chars"], answer["cut"]]


def _texts(agent):
    return {(m.KIND, m.pk): m.text for model in (Memory, Episode) for m in model.objects.filter(agent=agent)}


@pytest.mark.parametrize("filters", FILTERS, ids=[json.dumps(f, sort_keys=True) for f in FILTERS])
def test_recall_with_a_filter_answers_as_a_store_holding_only_the_matching_records(
    filters, run_on_commit, other_agent
):
    """The twin rule: scores, excerpts, their order, cuts and supersessions are those of a store that
    holds only what the filter keeps (its BM25 statistics are theirs alone)."""
    items = _corpus()
    full, _ = create_agent(agent_id="full")
    twin, _ = create_agent(agent_id="twin")
    _store_lines(full, items, run_on_commit)
    kept = [item for item in items if _matches(item, filters)]
    _store_lines(twin, kept, run_on_commit)
    # Another agent's records, tagged and dated alike, change nothing.
    _store_lines(other_agent, _corpus(seed=8), run_on_commit)
    full_texts, twin_texts = _texts(full), _texts(twin)
    rng = random.Random(3)
    questions = [" ".join(rng.sample(WORDS, 3)) for _ in range(6)]
    compared = 0
    for question in questions:
        for most, max_chars in ((5, 4000), (3, 600), (20, 100_000)):
            filtered = recall(agent=full, query=question, most=most, max_chars=max_chars, **filters)
            alone = recall(agent=twin, query=question, most=most, max_chars=max_chars)
            assert _seen(filtered, full_texts) == _seen(alone, twin_texts), (question, most)
            compared += bool(alone["excerpts"])
            # Nothing the filter leaves out is quoted.
            wanted = {t for t in twin_texts.values()}
            assert all(full_texts[(e["kind"], e["id"])] in wanted for e in filtered["excerpts"])
    assert compared >= (6 if kept else 0)


def test_a_filtered_out_record_never_takes_a_place_even_as_the_best_match(keyed):
    agent, _raw, api = keyed
    best = api("post", "/memories", {"text": "copper lantern copper lantern copper lantern", "tags": ["old"]})
    api("post", "/memories", {"text": prose(150, seed=5), "tags": ["old"]})  # long: nodes
    kept = api("post", "/memories", {"text": "a copper kettle", "tags": ["new"]}).json()["id"]
    question = {"question": "copper lantern", "most": 1}
    assert api("post", "/recall", question).json()["excerpts"][0]["id"] == best.json()["id"]
    for filters in ({"tags": ["new"]}, {"kinds": ["mem"], "tags": ["new"]}):
        for most in (1, 50):
            answer = api("post", "/recall", {**question, **filters, "most": most})
            assert answer.status_code == 200, answer.content
            assert [e["id"] for e in answer.json()["excerpts"]] == [kept]
    assert api("post", "/recall", {**question, "kinds": ["ep"]}).json()["excerpts"] == []


def test_recall_filters_over_the_api_and_mcp_and_their_errors(client, keyed):
    agent, raw, api = keyed
    ids = {}
    for text, kind, tags, valid in (
        ("harbor meeting about the budget", "memories", ["work"], {}),
        ("harbor picnic with the family", "episodes", ["home"], {}),
        ("harbor office lease", "memories", ["work", "home"], {"valid_until": "2020-01-01T00:00:00Z"}),
    ):
        ids[text] = api("post", f"/{kind}", {"text": text, "tags": tags, **valid}).json()["id"]

    def found(arguments):
        answer = api("post", "/recall", {"question": "harbor", "most": 10, **arguments})
        assert answer.status_code == 200, answer.content
        assert_declared(answer.json(), RecallOut)
        result = call_tool(client, raw, "recall", {"question": "harbor", "most": 10, **arguments})
        assert result["structuredContent"] == answer.json()
        return {e["text"] for e in answer.json()["excerpts"]}

    everything = set(ids)
    assert found({}) == everything
    assert found({"tags": ["work"]}) == {"harbor meeting about the budget", "harbor office lease"}
    assert found({"tags": ["work", "home"]}) == {"harbor office lease"}
    assert found({"kinds": ["ep"]}) == {"harbor picnic with the family"}
    assert found({"valid_at": "2026-06-01T00:00:00Z"}) == everything - {"harbor office lease"}
    assert found({"since": "2000-01-01T00:00:00Z", "until": "2999-01-01T00:00:00Z"}) == everything
    assert found({"since": "2999-01-01"}) == set()
    for arguments, code in (
        ({"since": "2026-02-30T00:00:00"}, "invalid_since"),
        ({"until": 12}, None),
        ({"valid_at": "soon"}, "invalid_valid_at"),
        ({"valid_at": "9999-12-31T23:59:59-14:00"}, "invalid_valid_at"),
        ({"kinds": ["memo"]}, None),
        ({"kinds": []}, None),
        ({"tags": []}, None),
        ({"tags": ["  "]}, "invalid_tags"),
        ({"tags": ["x" * 65]}, None),
    ):
        response = api("post", "/recall", {"question": "harbor", **arguments})
        assert response.status_code == 400, (arguments, response.content)
        assert response.json()["error"]["code"] in (code, "invalid_request"), response.json()
        error = tool_error(call_tool(client, raw, "recall", {"question": "harbor", **arguments}))
        assert error["code"] in ("invalid_arguments", code), error


def test_one_agent_never_sees_anothers_records_whatever_the_filters(run_on_commit, other_agent):
    mine, _ = create_agent(agent_id="mine")
    _store_lines(mine, _corpus(seed=11, count=20), run_on_commit)
    _store_lines(other_agent, _corpus(seed=11, count=20), run_on_commit)  # the same texts, tags, times
    own = {(kind, pk) for kind, pk in _texts(mine)}
    rng = random.Random(5)
    for filters in [{}, *FILTERS]:
        for _ in range(3):
            answer = recall(agent=mine, query=" ".join(rng.sample(WORDS, 2)), most=50, **filters)
            assert {(e["kind"], e["id"]) for e in answer["excerpts"]} <= own
            assert all(
                (e["superseded_by"]["kind"], e["superseded_by"]["id"]) in own
                for e in answer["excerpts"]
                if e["superseded_by"]
            )


# --- Superseded statements -----------------------------------------------------------------


def test_the_slot_rule_masks_numbers_and_names_but_not_the_opening_word():
    assert statement("I live in Porto.").shape == "i live in #"
    assert statement("Anna: I live in New York now").values == ("new york",)
    assert restated("I live in Porto.", "I live in Lisbon.")
    assert restated("My rent is 800 euros a month.", "My rent is 950 euros a month.")
    assert not restated("I live in Porto.", "I live in Porto.")  # the same value
    assert not restated("Hi Anna!", "Hi Bob!")  # too few words besides the value
    assert not restated("Anna: I live in Porto.", "Bob: I live in Lisbon.")  # two speakers
    assert not restated("I live in Porto.", "I moved to Lisbon.")  # other words: not caught


def test_a_newer_statement_ranks_first_and_marks_the_older_superseded(client, keyed):
    agent, raw, api = keyed
    porto = api("post", "/memories", {"text": "I live in Porto.", "tags": ["porto"]}).json()["id"]
    api("post", "/memories", {"text": "I like green tea."})
    lisbon = api("post", "/memories", {"text": "I live in Lisbon."}).json()["id"]
    answer = api("post", "/recall", {"question": "where do I live", "most": 5}).json()
    assert_declared(answer, RecallOut)
    ranked = [(e["id"], e["superseded_by"]) for e in answer["excerpts"] if e["id"] in (porto, lisbon)]
    assert ranked == [(lisbon, None), (porto, {"kind": "mem", "id": lisbon})]
    assert call_tool(client, raw, "recall", {"question": "where do I live"})["structuredContent"] == answer
    # A record stored later whose statement held earlier (valid_from) is the older one.
    rent_new = api("post", "/episodes", {"text": "My rent is 950 euros a month."}).json()["id"]
    rent_old = api(
        "post",
        "/memories",
        {"text": "My rent is 800 euros a month.", "valid_from": "2020-01-01T00:00:00Z"},
    ).json()["id"]
    excerpts = api("post", "/recall", {"question": "rent a month euros", "most": 5}).json()["excerpts"]
    rents = [(e["kind"], e["id"], e["superseded_by"]) for e in excerpts if "rent" in e["text"]]
    assert rents == [("ep", rent_new, None), ("mem", rent_old, {"kind": "ep", "id": rent_new})]
    # With the newer one filtered out, nothing supersedes the older.
    alone = api("post", "/recall", {"question": "where do I live", "tags": ["porto"]}).json()["excerpts"]
    assert [(e["id"], e["superseded_by"]) for e in alone] == [(porto, None)]


# --- The analyzer of the keyword leg -------------------------------------------------------


@pytest.fixture
def lexical(monkeypatch):
    """No embedder: recall ranks by words alone, so only the analyzer decides what is found."""
    monkeypatch.setattr("ragsite.embedding.get_embedder", lambda backend=None: NoneEmbedder())


@pytest.mark.parametrize(
    "analyzer, text, question",
    [
        ("english", "The travel policy covers trains.", "policies"),
        ("english", "She was running every morning.", "runs"),
        ("cjk", "我在东京大学学习经济学。", "东京"),
        ("cjk", "東京タワーに行きました", "タワー"),
    ],
)
def test_the_analyzer_finds_what_simple_terms_miss(
    client, keyed, lexical, settings, analyzer, text, question
):
    agent, raw, api = keyed
    api("post", "/memories", {"text": text})
    api("post", "/memories", {"text": "unrelated words entirely"})
    settings.MEMORY_ANALYZER = "simple"
    assert api("post", "/recall", {"question": question}).json()["excerpts"] == []
    settings.MEMORY_ANALYZER = analyzer  # the cached index is read again with the new analyzer
    found = api("post", "/recall", {"question": question}).json()["excerpts"]
    assert [e["text"] for e in found] == [text]
    assert call_tool(client, raw, "recall", {"question": question})["structuredContent"]["excerpts"] == found


def test_an_unknown_memory_analyzer_is_a_system_check_error(settings):
    from django.core.management.base import SystemCheckError

    settings.MEMORY_ANALYZER = "klingon"
    with pytest.raises(SystemCheckError, match="memory.E003"):
        call_command("check")
