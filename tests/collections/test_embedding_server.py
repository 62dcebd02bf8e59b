"""ragsite serves its own model over the OpenAI-compatible protocol its http backend speaks."""

import json

import numpy as np
import pytest

from collections_app.models import ModelCall
from collections_app.services.agents import create_agent
from ragsite import embedding
from ragsite.embedders import build_embedder

pytestmark = pytest.mark.django_db


@pytest.fixture
def raw_key():
    return create_agent(agent_id="embedder-client")[1]


def post(client, path, payload, raw_key):
    body = payload if isinstance(payload, str) else json.dumps(payload)
    return client.post(path, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw_key}")


def test_embeddings_answer_in_the_openai_shape_and_match_the_model(client, raw_key):
    response = post(client, "/v1/embeddings", {"input": ["carry-over days", "badges"]}, raw_key)
    assert response.status_code == 200
    body = response.json()
    assert body["model"] == "hash-64" and [d["index"] for d in body["data"]] == [0, 1]
    served = np.array([d["embedding"] for d in body["data"]], dtype=np.float32)
    np.testing.assert_allclose(
        served, embedding.get_embedder().embed(["carry-over days", "badges"]), atol=1e-6
    )
    assert body["usage"]["prompt_tokens"] == 2 + 2 + 1 + 2


def test_embedding_calls_are_charged_to_the_keys_agent_without_text(client, raw_key):
    post(client, "/v1/embeddings", {"input": "a secret sentence"}, raw_key)
    call = ModelCall.objects.get()
    assert (call.agent.agent_id, call.purpose, call.tokens_in) == ("embedder-client", "embed", 5)
    assert "secret" not in json.dumps(list(ModelCall.objects.values()), default=str)


def test_count_tokens_and_window_end(client, raw_key):
    text = "one two three four five six"
    body = post(client, "/count_tokens", {"text": text, "window": 5}, raw_key).json()
    assert body["tokens"] == 8 and body["window"] == 256
    assert body["window_end_char"] == len("one two three ")
    assert post(client, "/count_tokens", {"text": text}, raw_key).json()["window_end_char"] is None


def test_tokenize_gives_ids_and_offsets(client, raw_key):
    body = post(client, "/v1/tokenize", {"input": "alpha beta"}, raw_key).json()
    assert len(body["tokens"]) == len(body["offsets"]) == 4
    assert body["offsets"][1:3] == [[0, 5], [6, 10]]


@pytest.mark.parametrize(
    "path,payload,status",
    [
        ("/v1/embeddings", {"input": []}, 400),
        ("/v1/embeddings", {"input": [1, 2]}, 400),
        ("/v1/embeddings", {"input": ["x"] * 513}, 400),
        ("/v1/embeddings", {"input": "x", "model": "gpt-9"}, 404),
        ("/v1/embeddings", "{broken", 400),
        ("/count_tokens", {"text": "x", "window": 1}, 400),
        ("/count_tokens", {"text": 5}, 400),
        ("/v1/tokenize", {"input": "x" * 100_001}, 400),
    ],
)
def test_bad_requests_get_the_error_shape(client, raw_key, path, payload, status):
    response = post(client, path, payload, raw_key)
    assert response.status_code == status
    assert set(response.json()["error"]) == {"code", "message"}


def test_the_endpoints_need_a_key(client):
    response = client.post("/v1/embeddings", "{}", content_type="application/json")
    assert response.status_code == 401 and response["WWW-Authenticate"] == "Bearer"


@pytest.mark.django_db(transaction=True)
def test_the_http_backend_pointed_at_ragsite_reproduces_its_vectors(live_server, raw_key):
    remote = build_embedder("http", url=live_server.url, model="hash-64", api_key=raw_key, timeout=10)
    texts = ["Laptops use full-disk encryption.", "Mileage is reimbursed per kilometre."]
    np.testing.assert_allclose(remote.embed(texts), embedding.get_embedder().embed(texts), atol=1e-6)
    assert remote.count_tokens("one two three") == 5
    assert remote.window_end_char("one two three four", 4) == len("one two ")


@pytest.mark.model
@pytest.mark.django_db(transaction=True)
def test_the_http_backend_reproduces_the_real_local_model(live_server, settings):
    settings.EMBED_BACKEND = "local"
    raw = create_agent(agent_id="model-client")[1]
    remote = build_embedder("http", url=live_server.url, model="all-MiniLM-L6-v2", api_key=raw, timeout=60)
    texts = ["How many days of leave carry over?", "Ünïcödé and 日本語 text", "x " * 400]
    local = embedding.get_embedder().embed(texts)
    served = remote.embed(texts)
    assert np.min(np.sum(local * served, axis=1)) > 0.99999
    assert remote.count_tokens("x " * 400) == embedding.get_embedder().count_tokens("x " * 400)
    assert remote.window_end_char("x " * 400, 256) == embedding.get_embedder().window_end_char(
        "x " * 400, 256
    )
