"""Records listed and read (GET /records, /memories, /episodes), node reads while nodes are
pending, recall's excerpts over HTTP and MCP, and agent isolation of every answer."""

import importlib
import logging
from datetime import timedelta

import pytest
from django.utils import timezone

from collections_app.services.agents import create_agent
from memory_app import services
from memory_app.models import Memory, RecordNode
from tests.servers import RerankServer, serving

from .conftest import WINDOW, prose

pytestmark = pytest.mark.django_db

BASE = "/api/v1/memory"
recall_module = importlib.import_module("memory_app.services.recall")


@pytest.fixture
def caller(client, django_capture_on_commit_callbacks):
    """`caller(method, path, body=None, key=..., build=True)`; build=False: queued node builds never run."""
    agent, raw = create_agent(agent_id="reader")

    def call(method, path, body=None, key=raw, build=True):
        headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
        with django_capture_on_commit_callbacks(execute=build):
            if method == "get":
                return client.get(BASE + path, body or {}, **headers)
            return client.post(BASE + path, body, content_type="application/json", **headers)

    call.agent = agent
    return call


def code_of(response):
    return response.json()["error"]["code"]


def test_a_short_record_is_read_whole_with_its_times_and_no_nodes(caller):
    text = "The spare key is under the blue pot, left of the door."
    stored = caller("post", "/memories", {"text": text}).json()
    body = caller("get", f"/records/mem/{stored['id']}").json()
    assert body["text"] == text and body["text_length"] == len(text) and body["kind"] == "mem"
    assert body["locked"] is False and body["created_at"] and body["updated_at"]
    assert body["nodes"] == {"status": "fits", "items": []}
    # It fits the window, so it will never have nodes: a node read is the 404 of a node that does not exist.
    missing = caller("get", f"/nodes/mem/{stored['id']}/0")
    assert missing.status_code == 404 and code_of(missing) == "unknown_node"


def test_a_long_record_lists_its_nodes_with_offsets_once_built(caller):
    text = prose(220, seed=7)
    stored = caller("post", "/episodes", {"text": text}).json()
    body = caller("get", f"/records/ep/{stored['id']}").json()
    assert body["nodes"]["status"] == "built" and body["token_count"] > WINDOW
    items = body["nodes"]["items"]
    assert len(items) >= 2 and items[0]["start"] == 0 and items[-1]["end"] == len(text)
    assert all(a["end"] == b["start"] for a, b in zip(items, items[1:], strict=False))
    past = caller("get", f"/nodes/ep/{stored['id']}/{len(items)}")
    assert past.status_code == 404 and code_of(past) == "unknown_node"


def test_while_nodes_are_pending_a_node_read_is_409_with_retry_after_and_recall_quotes_the_opening(caller):
    text = prose(220, seed=8) + "\n\nThe albatross xylophone sits in the loft."
    stored = caller("post", "/memories", {"text": text}, build=False).json()
    assert stored["nodes"] == {"status": "queued"} and not RecordNode.objects.exists()
    for index in (0, 3, 40):
        pending = caller("get", f"/nodes/mem/{stored['id']}/{index}")
        assert pending.status_code == 409 and code_of(pending) == "nodes_pending"
        assert int(pending["Retry-After"]) > 0
    assert caller("get", f"/records/mem/{stored['id']}").json()["nodes"] == {"status": "pending", "items": []}
    (excerpt,) = caller("post", "/recall", {"question": "albatross xylophone"}).json()["excerpts"]
    assert excerpt["nodes"] == "pending" and excerpt["start"] == 0 and len(excerpt["text"]) <= 300
    assert text.startswith(excerpt["text"]) and excerpt["record_length"] == len(text)
    assert services.build_nodes("mem", stored["id"]).status == "built"
    assert caller("get", f"/nodes/mem/{stored['id']}/0").status_code == 200
    excerpt = caller("post", "/recall", {"question": "albatross xylophone"}).json()["excerpts"][0]
    assert isinstance(excerpt["nodes"], dict) and "albatross xylophone" in excerpt["text"]


def test_a_record_that_fits_is_recalled_whole_however_long(caller):
    # Long words: past the 300 characters of an opening, inside the 40-token window.
    text = "Lighthouse keepers extinguished harbormaster lanterns " * 6 + "unquestionably."
    assert 300 < len(text) and len(text.split()) < WINDOW
    stored = caller("post", "/memories", {"text": text}).json()
    assert "nodes" not in stored  # it fits the window
    (excerpt,) = caller("post", "/recall", {"question": "lighthouse keepers lanterns"}).json()["excerpts"]
    assert excerpt["text"] == text and excerpt["nodes"] is None and not excerpt["cut"]


def test_misses_are_not_warning_lines(caller, caplog):
    stored = caller("post", "/memories", {"text": "short"}).json()
    long_id = caller("post", "/memories", {"text": prose(220, seed=9)}, build=False).json()["id"]
    with caplog.at_level(logging.INFO):
        assert caller("get", f"/nodes/mem/{stored['id']}/0").status_code == 404
        assert caller("get", f"/nodes/mem/{long_id}/0").status_code == 409
        assert caller("get", f"/records/mem/{stored['id'] + 999}").status_code == 404
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]


def test_memories_and_episodes_are_listed_newest_first_a_page_at_a_time(caller):
    now = timezone.now()
    ids = []
    for n in range(7):
        ids.append(caller("post", "/memories", {"text": f"note number {n}"}).json()["id"])
        Memory.objects.filter(pk=ids[-1]).update(created_at=now - timedelta(hours=10 - n))
    caller("post", "/episodes", {"text": "an episode"})
    seen, cursor = [], None
    for _page in range(5):
        body = caller("get", "/memories", {"limit": 3, **({"cursor": cursor} if cursor else {})}).json()
        seen += [r["id"] for r in body["records"]]
        assert all(r["kind"] == "mem" and r["nodes"] == "fits" for r in body["records"])
        cursor = body["next"]
        if cursor is None:
            break
    assert seen == ids[::-1]
    first = caller("get", "/memories", {"limit": 1}).json()["records"][0]
    assert first["opening"] == "note number 6" and first["text_length"] == 13
    window = caller(
        "get",
        "/memories",
        {"since": (now - timedelta(hours=8)).isoformat(), "until": (now - timedelta(hours=5)).isoformat()},
    ).json()
    assert [r["id"] for r in window["records"]] == [
        ids[4],
        ids[3],
        ids[2],
    ]  # since inclusive, until exclusive
    assert [r["kind"] for r in caller("get", "/episodes").json()["records"]] == ["ep"]


@pytest.mark.parametrize(
    "query", [{"limit": 0}, {"limit": 101}, {"cursor": "not-a-cursor"}, {"since": "yesterday"}]
)
def test_bad_list_parameters_are_400(caller, query):
    response = caller("get", "/memories", query)
    assert response.status_code == 400 and code_of(response) in {"invalid_request", "invalid_cursor"}


def test_another_agents_record_is_a_404_like_a_missing_one_everywhere(caller):
    _them, their_key = create_agent(agent_id="someone-else")
    theirs = caller("post", "/memories", {"text": prose(220, seed=3)}, key=their_key).json()["id"]
    for path in (f"/records/mem/{theirs}", f"/nodes/mem/{theirs}/0"):
        on_theirs, on_missing = (
            caller("get", path),
            caller("get", path.replace(str(theirs), str(theirs + 999))),
        )
        assert on_theirs.status_code == on_missing.status_code == 404
        assert code_of(on_theirs) == code_of(on_missing) == "unknown_record"
    assert caller("get", "/memories").json() == {"records": [], "next": None}


def corpus(seed):
    return [prose(220, seed=seed * 10 + n) for n in range(3)] + [
        "river stone lantern by the harbor",
        "copper signal over the orchard",
        "falcon quartz willow beacon",
    ]


def answers(agent):
    return [
        services.recall(agent=agent, query=q, most=10, max_chars=m)
        for q in ("river stone lantern", "copper signal orchard", "falcon beacon canyon")
        for m in (150, 4000)
    ]


def test_another_agents_records_change_nothing_in_an_agents_answer(run_on_commit):
    """Scores, excerpts and their order depend on the agent's own records only: BM25's statistics,
    the candidates and the budget never see another agent's."""
    mine, _ = create_agent(agent_id="mine")
    for text in corpus(1):
        run_on_commit(services.store_memory, agent=mine, text=text)
    before = answers(mine)
    assert any(a["excerpts"] for a in before) and any(a["cut"] for a in before)
    other, _ = create_agent(agent_id="other")
    for text in corpus(2) * 2 + ["river river river stone", "lantern " * 50]:
        run_on_commit(services.archive_episode, agent=other, text=text)
    assert answers(mine) == before
    recall_module._cache.clear()  # and from a cold start, every row read again
    assert answers(mine) == before


def test_mcp_lists_and_reads_records(client):
    from tests.collections.test_mcp import call_tool

    agent, raw = create_agent(agent_id="mcp-reader")
    stored, _ = services.store_memory(agent=agent, text="The boiler is serviced every October.")
    listed = call_tool(client, raw, "list_records", {"kind": "mem", "limit": 5})["structuredContent"]
    assert [r["id"] for r in listed["records"]] == [stored.pk] and listed["next"] is None
    read = call_tool(client, raw, "read_record", {"kind": "mem", "id": stored.pk})["structuredContent"]
    assert read["text"] == stored.text and read["nodes"]["status"] == "fits"
    missing = call_tool(client, raw, "read_record", {"kind": "mem", "id": stored.pk + 99})
    assert missing["isError"] is True
    recalled = call_tool(client, raw, "recall", {"question": "boiler service", "max_chars": 20})[
        "structuredContent"
    ]
    assert recalled["chars"] <= 20 and recalled["max_chars"] == 20


# --- The optional reranker orders the candidates (a real /rerank endpoint on 127.0.0.1) ----------


def test_the_reranker_orders_the_excerpts_and_a_failure_keeps_the_fused_order(agent, settings):
    texts = [
        "The harbor lantern was lit at dusk by the keeper.",
        "A harbor walk with a lantern and a falcon.",
        "Lantern oil is kept in the harbor shed.",
    ]
    for text in texts:
        services.store_memory(agent=agent, text=text)
    services.repair_all()  # the stores' vectors
    fused = services.recall(agent=agent, query="harbor lantern", most=3)
    assert fused["rerank"] == {"status": "not configured"} and len(fused["excerpts"]) == 3
    with serving(RerankServer(favourite="falcon")) as server:
        settings.RERANK_URL, settings.RERANK_MODEL, settings.RERANK_TIMEOUT = (
            server.url + "/v1/rerank",
            "rr",
            0.5,
        )
        reranked = services.recall(agent=agent, query="harbor lantern", most=3)
        assert reranked["rerank"] == {"status": "reranked", "model": "rr", "depth": 3}
        assert "falcon" in reranked["excerpts"][0]["text"] and "falcon" not in fused["excerpts"][0]["text"]
        # The scores stay the fused ones: the reranker decides the order only.
        assert sorted(e["score"] for e in reranked["excerpts"]) == sorted(
            e["score"] for e in fused["excerpts"]
        )
        assert server.requests[0]["body"]["query"] == "harbor lantern"
        # The call is made without the agent's index lock: its other recalls do not wait for it.
        held = []
        server.during = lambda: held.append(recall_module._cache[agent.pk].lock.locked())
        services.recall(agent=agent, query="harbor lantern", most=3)
        assert held == [False]
        server.during = None
        server.mode = "error"
        failed = services.recall(agent=agent, query="harbor lantern", most=3)
        assert failed["rerank"] == {"status": "unavailable"} and failed["excerpts"] == fused["excerpts"]
