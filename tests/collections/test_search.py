"""Search: ranking, floor, around, readers, review, the judge, the ledger, and the API around them."""

import json
import logging
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command

from collections_app.models import Document, Label, ModelCall, Paragraph, Reader
from collections_app.schemas.search import SearchOut
from collections_app.services.agents import create_agent, create_collection, create_reader, issue_key
from collections_app.services.builds import build_collection
from collections_app.services.search import search_collection
from ragsite.errors import Conflict, Forbidden, RagsiteError, TooManyRequests
from tests.conftest import HANDBOOK
from tests.declared import assert_declared, every_key
from tests.servers import JudgeServer, serving

pytestmark = pytest.mark.django_db

QUESTION = "how many days of annual leave carry over"


@pytest.fixture
def judge(settings):
    with serving(JudgeServer()) as server:
        settings.JUDGE_URL, settings.JUDGE_MODEL, settings.JUDGE_TIMEOUT = server.url, "judge-mini", 0.5
        yield server


def ask(agent, collection="handbook", question=QUESTION, **kwargs):
    return search_collection(agent=agent, collection=collection, question=question, **kwargs)


def test_the_answering_paragraph_ranks_first_with_the_answer_shape(agent, handbook):
    answer = ask(agent, around=0)
    assert_declared(answer, SearchOut)
    assert set(answer) == every_key(SearchOut)
    assert (answer["mode"], answer["model"], answer["floor"], answer["around"]) == (
        "hybrid",
        "hash-64",
        0.22,
        0,
    )
    assert answer["floor_source"] == "default"
    best = answer["paragraphs"][0]
    assert "capped at five days" in best["text"]
    assert set(best) == {
        "text",
        "score",
        "document",
        "section",
        "passages",
        "chunk_id",
        "chunk_ids",
        "first",
        "last",
        "pages",
        "excerpts",
    }
    assert (best["document"], best["section"], best["passages"]) == ("leave.md", "Leave", 1)
    assert best["chunk_ids"] == [best["chunk_id"]] and best["chunk_id"].startswith("leave.md#")
    assert 0 <= best["score"] <= 1
    assert answer["refused"] is None and answer["judge"] == {"status": "not configured"}
    assert answer["rerank"] == {"status": "not configured"}


def test_a_question_nothing_answers_gets_no_paragraphs_and_the_floor(agent, handbook):
    answer = ask(agent, question="quantum chromodynamics gluons")
    assert answer["paragraphs"] == [] and answer["floor"] == 0.22


def test_the_floor_can_be_lowered_per_request_and_per_collection(agent, handbook):
    assert ask(agent, question="quantum badges", min_score=0)["paragraphs"]
    handbook.min_score = 0.0
    handbook.save()
    assert ask(agent, question="quantum badges")["floor"] == 0.0


def test_around_stitches_neighbours_of_the_same_document_in_order(agent, handbook):
    alone = ask(agent, around=0, most=1)["paragraphs"][0]
    wide = ask(agent, around=1, most=1)["paragraphs"][0]
    assert wide["passages"] > alone["passages"] == 1
    assert wide["first"] <= alone["first"] and wide["last"] >= alone["last"]
    assert alone["text"] in wide["text"] and wide["document"] == "leave.md"
    assert "Mileage" not in wide["text"]  # never across a document seam


def test_a_collection_without_vectors_ranks_lexically_without_embedding_the_question(
    agent, knowledge_folder, settings
):
    settings.EMBED_BACKEND = "none"
    collection = create_collection(agent=agent, name="plain", method="fixed", size=80)
    knowledge_folder("plain", HANDBOOK)
    build_collection(collection=collection)
    answer = ask(agent, "plain")
    assert answer["mode"] == "lexical" and answer["model"] == "lexical"
    assert "five days" in answer["paragraphs"][0]["text"]


def test_a_per_reader_collection_needs_a_reader_and_an_unknown_one_reads_only_unlabelled(
    agent, knowledge_folder
):
    collection = create_collection(agent=agent, name="secret", method="fixed", size=80, per_reader=True)
    knowledge_folder("secret", HANDBOOK)
    build_collection(collection=collection)
    with pytest.raises(RagsiteError, match="say which reader") as raised:
        ask(agent, "secret")
    assert raised.value.status == 400
    hr = Label.objects.create(name="hr")
    Paragraph.objects.get(collection=collection, text__contains="capped at five").labels.add(hr)
    create_reader(external_id="nobody-here@example.com", labels=[])
    # An unknown id answers exactly as a known reader holding no labels: ids cannot be probed
    # (docs/decisions/0018).
    unknown = ask(agent, "secret", reader="mallory@example.com", min_score=0, most=50)
    known = ask(agent, "secret", reader="nobody-here@example.com", min_score=0, most=50)
    assert unknown == known and unknown["paragraphs"]
    assert all("capped at five" not in p["text"] for p in unknown["paragraphs"])


def test_labels_filter_before_ranking_and_are_never_stitched_in(agent, knowledge_folder):
    collection = create_collection(agent=agent, name="secret", method="fixed", size=80, per_reader=True)
    knowledge_folder("secret", HANDBOOK)
    build_collection(collection=collection)
    hr = Label.objects.create(name="hr")
    create_reader(external_id="alice", labels=["hr"])
    create_reader(external_id="bob", labels=["staff"])
    capped = Paragraph.objects.get(collection=collection, text__contains="capped at five")
    capped.labels.add(hr)
    for_alice = ask(agent, "secret", reader="alice", around=1)
    assert any("capped at five" in p["text"] for p in for_alice["paragraphs"])
    for_bob = ask(agent, "secret", reader="bob", around=2, min_score=0, most=50)
    assert all("capped at five" not in p["text"] for p in for_bob["paragraphs"])
    # The run around the restricted paragraph breaks rather than closing over it, and positions
    # count only what bob may read, so no gap shows where it sits.
    readable = Paragraph.objects.filter(collection=collection).exclude(pk=capped.pk).count()
    assert all(1 <= p["first"] <= p["last"] <= readable for p in for_bob["paragraphs"])
    assert sorted(i for p in for_bob["paragraphs"] for i in range(p["first"], p["last"] + 1)) == list(
        range(1, readable + 1)
    )


def test_documents_in_review_are_not_searched_until_approved(agent, handbook):
    Document.objects.filter(collection=handbook, name="leave.md").update(status=Document.NEEDS_REVIEW)
    assert all(p["document"] != "leave.md" for p in ask(agent, min_score=0, most=50)["paragraphs"])
    Document.objects.filter(collection=handbook, name="leave.md").update(status=Document.ACTIVE)
    assert ask(agent)["paragraphs"][0]["document"] == "leave.md"


def test_a_search_right_after_a_rebuild_sees_the_new_build(agent, handbook, knowledge_folder):
    assert ask(agent, question="parking spaces")["paragraphs"] == []
    folder = knowledge_folder("handbook", {"parking.md": "# Parking\n\nParking spaces are free.\n"})
    assert folder.exists()
    build_collection(collection=handbook)
    assert ask(agent, question="parking spaces")["paragraphs"][0]["document"] == "parking.md"


def test_a_collection_never_built_is_its_own_answer(agent):
    create_collection(agent=agent, name="empty")
    with pytest.raises(Conflict, match="never been built"):
        ask(agent, "empty")


def test_a_question_embedded_by_another_model_is_refused(agent, handbook, monkeypatch):
    from ragsite import embedding
    from ragsite.embedders import HashEmbedder

    monkeypatch.setattr(embedding, "get_embedder", lambda backend=None: HashEmbedder(dimensions=32))
    with pytest.raises(Conflict, match="hash-64.*hash-32"):
        ask(agent)


# --- the judge ---------------------------------------------------------------


@pytest.fixture
def judged(handbook):
    handbook.judge = True
    handbook.save()
    return handbook


def test_an_approving_judge_gives_refused_false(agent, judged, judge):
    answer = ask(agent)
    assert answer["refused"] is False and answer["paragraphs"]
    assert answer["judge"] == {"status": "answered", "model": "judge-mini"}
    sent = judge.requests[-1]["body"]
    assert sent["temperature"] == 0 and QUESTION in sent["messages"][-1]["content"]


def test_a_refusing_judge_withholds_the_paragraphs(agent, judged, judge):
    judge.mode = "refuse"
    answer = ask(agent)
    assert answer["refused"] is True and answer["paragraphs"] == []


@pytest.mark.parametrize("mode", ["slow", "garbage", "error"])
def test_a_judge_that_gives_no_verdict_is_null_never_false(agent, judged, judge, mode):
    judge.mode = mode
    answer = ask(agent)
    assert answer["refused"] is None and answer["judge"] == {"status": "unavailable"}
    assert answer["paragraphs"]


def test_without_a_judge_url_refused_is_null(agent, judged, settings):
    settings.JUDGE_URL = ""
    answer = ask(agent)
    assert answer["refused"] is None and answer["judge"]["status"] == "not configured"


# --- the ledger ---------------------------------------------------------------


def test_the_judge_call_is_charged_to_the_agent_on_whose_behalf(agent, judged, judge, settings):
    settings.MODEL_PRICES = {"judge-mini": {"input": 1.0, "output": 2.0}}
    ask(agent, on_behalf_of="alpha")
    call = ModelCall.objects.get()
    assert (call.agent, call.collection, call.purpose, call.model) == (agent, judged, "judge", "judge-mini")
    assert (call.tokens_in, call.tokens_out, call.cost) == (120, 6, Decimal("0.132"))


def test_no_on_behalf_of_charges_nobody(agent, judged, judge):
    ask(agent)
    assert len(judge.requests) == 1 and not ModelCall.objects.exists()


def test_an_unknown_agent_on_behalf_of_is_400(agent, judged, judge):
    with pytest.raises(RagsiteError) as raised:
        ask(agent, on_behalf_of="ghost")
    assert raised.value.status == 400 and raised.value.code == "unknown_agent"


def test_a_key_charges_another_agent_only_when_allowed(agent, judged, judge):
    other, _raw = create_agent(agent_id="other")
    own_key = agent.keys.get()
    with pytest.raises(Forbidden):
        ask(agent, on_behalf_of="other", key=own_key)
    broker, _raw = issue_key(agent=agent, may_act_for_others=True)
    ask(agent, on_behalf_of="other", key=broker)
    assert ModelCall.objects.get().agent == other


def test_over_the_daily_budget_the_judge_is_skipped(agent, judged, judge, settings):
    settings.MODEL_PRICES = {"judge-mini": {"input": 1.0, "output": 0}}
    agent.daily_budget = Decimal("0.1")
    agent.save()
    ask(agent, on_behalf_of="alpha")  # 0.12 spent
    answer = ask(agent, on_behalf_of="alpha")
    assert answer["refused"] is None and answer["judge"] == {"status": "over budget"}
    assert ModelCall.objects.count() == 1 and len(judge.requests) == 1


def test_over_the_runaway_limit_is_429_with_retry_after(agent, judged, judge):
    agent.runaway_limit = 2
    agent.save()
    ask(agent, on_behalf_of="alpha")
    ask(agent, on_behalf_of="alpha")
    with pytest.raises(TooManyRequests) as raised:
        ask(agent, on_behalf_of="alpha")
    assert raised.value.status == 429 and int(raised.value.headers["Retry-After"]) >= 1


def test_no_question_or_paragraph_reaches_the_ledger_or_the_info_log(agent, judged, judge, caplog):
    with caplog.at_level(logging.INFO):
        answer = ask(agent, on_behalf_of="alpha", question="SECRET-QUESTION carry over days")
    ledger = json.dumps(list(ModelCall.objects.values()), default=str)
    texts = [p["text"] for p in answer["paragraphs"]] + ["SECRET-QUESTION"]
    info = "\n".join(r.getMessage() for r in caplog.records if r.levelno >= logging.INFO)
    for text in texts:
        assert text not in ledger and text not in info


# --- the API and the command ----------------------------------------------------


def post(client, raw, path, payload, **extra):
    body = payload if isinstance(payload, str) else json.dumps(payload)
    return client.post(
        path, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}", **extra
    )


@pytest.fixture
def api_key(agent):
    return issue_key(agent=agent)[1]


def test_the_api_searches_with_a_key(client, handbook, api_key):
    response = post(
        client, api_key, "/api/v1/collections/handbook/search", {"question": QUESTION, "around": 0}
    )
    assert response.status_code == 200, response.content
    assert "capped at five" in response.json()["paragraphs"][0]["text"]


def test_the_api_never_reveals_another_agents_collection(client, handbook):
    _other, raw = create_agent(agent_id="other")
    response = post(client, raw, "/api/v1/collections/handbook/search", {"question": QUESTION})
    assert response.status_code == 404 and response.json()["error"]["code"] == "unknown_collection"


@pytest.mark.parametrize(
    "payload",
    [
        {"question": ""},
        {"question": "x" * 2001},
        {"question": "q", "most": 0},
        {"question": "q", "most": 51},
        {"question": "q", "around": 6},
        {"question": "q", "around": -1},
        {"question": "q", "min_score": 1.5},
        {"most": 5},
        "{not json",
        "[1, 2]",
    ],
)
def test_bad_input_is_400_in_the_one_error_shape(client, handbook, api_key, payload):
    response = post(client, api_key, "/api/v1/collections/handbook/search", payload)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert set(error) == {"code", "message"} and error["message"]


def test_a_missing_reader_is_400_and_known_or_unknown_ones_answer_alike_over_the_api(
    client, agent, api_key, knowledge_folder
):
    collection = create_collection(agent=agent, name="secret", per_reader=True)
    knowledge_folder("secret", HANDBOOK)
    build_collection(collection=collection)
    url = "/api/v1/collections/secret/search"
    assert post(client, api_key, url, {"question": QUESTION}).json()["error"]["code"] == "reader_required"
    Reader.objects.create(external_id="carol")
    answers = [
        post(client, api_key, url, {"question": QUESTION, "reader": name})
        for name in ("carol", "nobody", "x\u0000y")
    ]
    assert {r.status_code for r in answers} == {200}
    assert len({r.content for r in answers}) == 1


def test_on_behalf_of_another_agent_or_nobody_answers_alike(client, agent, api_key, knowledge_folder):
    create_agent(agent_id="another-installation")
    knowledge_folder("handbook", HANDBOOK)
    create_collection(agent=agent, name="handbook", method="fixed", size=80)
    url = "/api/v1/collections/handbook/search"
    answers = [
        post(client, api_key, url, {"question": QUESTION, "onBehalfOf": name})
        for name in ("another-installation", "zz-nobody", "nul\u0000here")
    ]
    assert {r.status_code for r in answers} == {403}
    assert len({r.content for r in answers}) == 1


def test_labels_set_after_the_build_cut_the_overlap_they_hide(agent, knowledge_folder):
    """Overlap (docs/decisions/0017): a public piece began with the last characters of the secret piece
    before it."""
    collection = create_collection(
        agent=agent, name="merger", method="structure", size=200, overlap=120, per_reader=True
    )
    text = ("Our public leave policy is generous and clear. " * 4) + "The acquisition target is Hooli. "
    text += "The canteen opens at eight and closes at four every weekday. " * 4
    knowledge_folder("merger", {"plan.md": text})
    build_collection(collection=collection)
    rows = list(Paragraph.objects.filter(collection=collection).order_by("ordinal"))
    secret = next(p for p in rows if "Hooli" in p.text)
    after = next(p for p in rows if p.ordinal == secret.ordinal + 1)
    assert "Hooli" in after.text  # the overlap copied it
    public, restricted = Label.objects.create(name="pub"), Label.objects.create(name="secret")
    for paragraph in rows:  # labelled after the build, as a librarian does in the admin
        paragraph.labels.add(restricted if paragraph.pk == secret.pk else public)
    create_reader(external_id="alice", labels=["pub"])
    create_reader(external_id="bob", labels=["pub", "secret"])
    for question in ("Hooli acquisition target", "canteen opens", "leave policy"):
        for around in (0, 1, 3):
            answer = ask(
                agent, "merger", question=question, reader="alice", around=around, min_score=0, most=50
            )
            assert answer["paragraphs"] and all("Hooli" not in p["text"] for p in answer["paragraphs"])
    whole = ask(
        agent, "merger", question="Hooli acquisition target", reader="bob", around=0, min_score=0, most=50
    )
    assert any("Hooli" in p["text"] for p in whole["paragraphs"])


def test_runaway_over_the_api_is_429_with_retry_after(client, agent, judged, judge, api_key):
    agent.runaway_limit = 1
    agent.save()
    url = "/api/v1/collections/handbook/search"
    assert post(client, api_key, url, {"question": QUESTION, "onBehalfOf": "alpha"}).status_code == 200
    response = post(client, api_key, url, {"question": QUESTION, "onBehalfOf": "alpha"})
    assert response.status_code == 429 and response["Retry-After"]
    assert response.json()["error"]["code"] == "runaway_limit"


def test_the_api_reports_the_three_values_of_refused(client, judged, judge, api_key):
    url = "/api/v1/collections/handbook/search"
    assert post(client, api_key, url, {"question": QUESTION}).json()["refused"] is False
    judge.mode = "refuse"
    assert post(client, api_key, url, {"question": QUESTION}).json()["refused"] is True
    judge.mode = "garbage"
    body = post(client, api_key, url, {"question": QUESTION}).json()
    assert body["refused"] is None and body["judge"]["status"] == "unavailable"


def test_the_search_command_prints_json(handbook):
    out = StringIO()
    call_command("search", "alpha", "handbook", QUESTION, "--around", "0", "--json", stdout=out)
    answer = json.loads(out.getvalue())
    assert answer["mode"] == "hybrid" and "five days" in answer["paragraphs"][0]["text"]


def test_the_search_command_takes_the_declared_request(handbook):
    """Its options are `SearchIn`'s fields (the reader by name), read as the API reads them."""
    out = StringIO()
    call_command(
        "search",
        "alpha",
        "handbook",
        QUESTION,
        "--max-chars",
        "400",
        "--most",
        "2",
        "--filters",
        '{"type": "eq", "key": "document", "value": "nowhere.md"}',
        "--json",
        stdout=out,
    )
    answer = json.loads(out.getvalue())
    assert answer["max_chars"] == 400 and answer["paragraphs"] == []  # no document matches the filter


def test_the_api_queues_a_build(client, handbook, api_key):
    response = post(client, api_key, "/api/v1/collections/handbook/build", {})
    assert response.status_code == 202 and response.json()["status"] in ("queued", "succeeded")
