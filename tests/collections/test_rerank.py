"""The optional reranker: a real /rerank endpoint on 127.0.0.1 reorders the fused candidates."""

import json
from decimal import Decimal

import pytest

from collections_app.models import Label, ModelCall, Paragraph
from collections_app.services.agents import create_collection, create_reader
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from ragsite.model_calls.rerank import RerankUnavailable, ask_reranker, parse_scores
from tests.conftest import HANDBOOK
from tests.servers import RerankServer, serving

QUESTION = "how many days of annual leave carry over"


@pytest.fixture
def reranker(settings):
    # The reranker prefers the paragraph about lapsing days, which the fused score ranks second.
    with serving(RerankServer(favourite="lapse")) as server:
        settings.RERANK_URL, settings.RERANK_MODEL = server.url + "/v1/rerank", "rerank-mini"
        settings.RERANK_TIMEOUT = 0.5
        yield server


def ask(agent, **kwargs):
    return search_collection(agent=agent, collection="handbook", question=QUESTION, **kwargs)


# --- reading the two dialects -------------------------------------------------


def test_cohere_and_jina_results_and_tei_lists_give_a_score_per_document():
    cohere = {"results": [{"index": 1, "relevance_score": 0.8}, {"index": 0, "relevance_score": 0.2}]}
    assert parse_scores(cohere, 2) == [0.2, 0.8]
    assert parse_scores([{"index": 0, "score": -1.5}, {"index": 1, "score": 3.0}], 2) == [-1.5, 3.0]


@pytest.mark.parametrize(
    "payload",
    [
        {"results": [{"index": 0, "relevance_score": 0.5}]},  # one left out
        {"results": [{"index": 0, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.4}]},  # twice
        {
            "results": [{"index": 2, "relevance_score": 0.5}, {"index": 0, "relevance_score": 0.4}]
        },  # never sent
        {"results": [{"index": 0, "relevance_score": "high"}, {"index": 1, "relevance_score": 0.4}]},
        {"results": [{"index": 0, "relevance_score": float("nan")}, {"index": 1, "relevance_score": 0.4}]},
        {"results": "none"},
        {"data": []},
    ],
)
def test_a_partial_or_malformed_ranking_is_refused(payload):
    with pytest.raises((ValueError, KeyError, TypeError)):
        parse_scores(payload, 2)


def test_a_server_that_is_not_there_is_unavailable():
    with pytest.raises(RerankUnavailable, match="did not answer"):
        ask_reranker(
            url="http://127.0.0.1:9/rerank", model="m", api_key="", timeout=0.5, question="q", documents=["a"]
        )


# --- in a search --------------------------------------------------------------


@pytest.mark.django_db
def test_the_reranker_orders_the_fused_candidates_and_the_answer_says_so(agent, handbook, reranker, settings):
    url, settings.RERANK_URL = settings.RERANK_URL, ""
    fused = ask(agent, around=0, most=3, min_score=0)
    settings.RERANK_URL = url
    assert "capped at five" in fused["paragraphs"][0]["text"]
    assert "lapse" in fused["paragraphs"][1]["text"]

    answer = ask(agent, around=0, most=3, min_score=0)
    # Fewer paragraphs than RERANK_DEPTH (30): every one of them is a candidate.
    everything = Paragraph.objects.filter(collection=handbook).count()
    assert answer["rerank"] == {"status": "reranked", "model": "rerank-mini", "depth": everything}
    first = answer["paragraphs"][0]
    assert "lapse" in first["text"]
    assert first["rerank_score"] == 0.9 and first["fused_rank"] == 2
    # The score shown is still the fused one, the scale the floor stands on.
    assert first["score"] == fused["paragraphs"][1]["score"]
    sent = reranker.requests[-1]["body"]
    assert sent["query"] == QUESTION and sent["model"] == "rerank-mini"
    assert sent["documents"] == sent["texts"] and len(sent["documents"]) == answer["rerank"]["depth"]


@pytest.mark.django_db
def test_only_the_top_rerank_depth_candidates_are_sent(agent, handbook, reranker, settings):
    settings.RERANK_DEPTH = 3
    answer = ask(agent, around=0, most=2, min_score=0)
    assert answer["rerank"]["depth"] == 3 and len(reranker.requests[-1]["body"]["documents"]) == 3
    settings.RERANK_DEPTH = 1  # never fewer than the paragraphs asked for
    ask(agent, around=0, most=2, min_score=0)
    assert len(reranker.requests[-1]["body"]["documents"]) == 2


@pytest.mark.django_db
def test_text_embeddings_inference_is_spoken_too(agent, handbook, reranker, settings):
    settings.RERANK_URL = reranker.url + "/rerank"
    answer = ask(agent, around=0, most=3, min_score=0)
    assert answer["rerank"]["status"] == "reranked" and "lapse" in answer["paragraphs"][0]["text"]


@pytest.mark.django_db
def test_the_floor_still_applies_to_the_fused_score(agent, handbook, reranker):
    reranker.favourite = "mileage"  # the reranker loves a paragraph the question does not match
    answer = ask(agent, around=0, most=5)
    assert answer["paragraphs"] and all(p["score"] >= answer["floor"] for p in answer["paragraphs"])
    assert all("Mileage" not in p["text"] for p in answer["paragraphs"])


@pytest.mark.django_db
@pytest.mark.parametrize("mode", ["slow", "error", "garbage", "partial"])
def test_a_reranker_that_fails_leaves_the_fused_order(agent, handbook, reranker, mode):
    reranker.mode = mode
    fused_first = "capped at five"
    answer = ask(agent, around=0, most=3, min_score=0, on_behalf_of="alpha")
    assert answer["rerank"] == {"status": "unavailable"}
    assert fused_first in answer["paragraphs"][0]["text"]
    assert "rerank_score" not in answer["paragraphs"][0]
    assert not ModelCall.objects.exists()  # nothing answered, nothing charged


@pytest.mark.django_db
def test_the_call_is_charged_to_the_agent_on_whose_behalf(agent, handbook, reranker, settings):
    settings.MODEL_PRICES = {"rerank-mini": {"input": 1.0, "output": 0.0}}
    answer = ask(agent, around=0, most=3, min_score=0, on_behalf_of="alpha")
    call = ModelCall.objects.get()
    tokens = 10 * answer["rerank"]["depth"]
    assert (call.agent, call.collection, call.purpose, call.model) == (
        agent,
        handbook,
        "rerank",
        "rerank-mini",
    )
    assert (call.tokens_in, call.cost) == (tokens, Decimal(tokens) / 1000)


@pytest.mark.django_db
def test_no_on_behalf_of_charges_nobody(agent, handbook, reranker):
    ask(agent)
    assert len(reranker.requests) == 1 and not ModelCall.objects.exists()


@pytest.mark.django_db
def test_over_budget_the_reranker_is_not_called(agent, handbook, reranker):
    agent.daily_budget = Decimal("0")
    agent.save()
    answer = ask(agent, on_behalf_of="alpha")
    assert answer["rerank"] == {"status": "over budget"} and reranker.requests == []


@pytest.mark.django_db
def test_the_reranker_never_sees_a_paragraph_the_reader_may_not_read(agent, knowledge_folder, reranker):
    collection = create_collection(agent=agent, name="secret", method="fixed", size=80, per_reader=True)
    knowledge_folder("secret", HANDBOOK)
    build_collection(collection=collection)
    hr = Label.objects.create(name="hr")
    create_reader(external_id="bob", labels=["staff"])
    Paragraph.objects.get(collection=collection, text__contains="capped at five").labels.add(hr)
    search_collection(agent=agent, collection="secret", question=QUESTION, reader="bob", min_score=0, most=50)
    sent = reranker.requests[-1]["body"]["documents"]
    assert sent and all("capped at five" not in text for text in sent)


@pytest.mark.django_db
def test_over_the_api_a_failing_reranker_is_a_200_with_the_status(
    client, agent_key, knowledge_folder, reranker
):
    agent, raw = agent_key
    collection = create_collection(agent=agent, name="handbook", method="fixed", size=80)
    knowledge_folder("handbook", HANDBOOK, agent="keyed")
    build_collection(collection=collection)
    reranker.mode = "error"
    response = client.post(
        "/api/v1/collections/handbook/search",
        data=json.dumps({"question": QUESTION}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert response.status_code == 200
    assert response.json()["rerank"] == {"status": "unavailable", "model": None, "depth": None}
    reranker.mode = "ok"
    body = {"question": QUESTION, "min_score": 0, "around": 0}
    reranked = client.post(
        "/api/v1/collections/handbook/search",
        data=json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    ).json()
    assert reranked["rerank"]["status"] == "reranked"
    assert reranked["paragraphs"][0]["rerank_score"] == 0.9 and reranked["paragraphs"][0]["fused_rank"] == 2
