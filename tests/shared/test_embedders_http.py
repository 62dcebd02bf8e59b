"""The http embedding backend against a real HTTP server on 127.0.0.1 speaking the documented protocol.

The server answers /v1/embeddings, /v1/tokenize and /count_tokens like a healthy endpoint unless a
test scripts a different answer for a path (a status, a raw body, a delay), one answer per request.
Tokens in this server are whitespace-separated words (plus the two special tokens).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from ragsite.embedders import EmbeddingError, HttpEmbedder, build_embedder


@dataclass
class Scripted:
    """One scripted answer: a status, a body (JSON-encoded unless bytes), an optional delay."""

    status: int = 200
    body: object = None
    delay: float = 0.0


def _vector(text: str, width: int) -> list[float]:
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return [digest[i % len(digest)] / 255.0 - 0.5 + 0.01 for i in range(width)]


class FakeEmbeddingServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.width = 8
        self.offered = {"/v1/embeddings", "/v1/tokenize", "/count_tokens"}
        self.with_offsets = True
        self.with_usage = True
        self.reverse_order = False
        self.scripts: dict[str, deque[Scripted]] = defaultdict(deque)
        self.requests: list[tuple[str, dict, dict]] = []
        # Requests being answered right now, and the most there ever were at once.
        self.embedding_delay = 0.0
        self.in_flight = 0
        self.most_in_flight = 0
        self._flight = threading.Lock()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def script(self, path: str, *answers: Scripted) -> None:
        self.scripts[path].extend(answers)

    def calls(self, path: str) -> list[dict]:
        return [body for seen, body, _ in self.requests if seen == path]

    def handle_error(self, request, client_address) -> None:
        pass  # a client that timed out and hung up is expected here

    def answer(self, path: str, body: dict) -> tuple[int, object]:
        if path not in self.offered:
            return 404, {"error": "not found"}
        if path == "/v1/embeddings":
            texts = body["input"]
            data = [
                {"embedding": _vector(text, self.width), "index": i, "object": "embedding"}
                for i, text in enumerate(texts)
            ]
            if self.reverse_order:
                data.reverse()
            answer: dict = {"object": "list", "data": data, "model": body["model"]}
            if self.with_usage:
                answer["usage"] = {"prompt_tokens": sum(len(t.split()) + 2 for t in texts), "total_tokens": 0}
            return 200, answer
        text = body["input"] if path == "/v1/tokenize" else body["text"]
        spans = [word.span() for word in re.finditer(r"\S+", text)]
        if path == "/v1/tokenize":
            answer = {"tokens": [101] + [1000 + i for i in range(len(spans))] + [102]}
            if self.with_offsets:
                answer["offsets"] = [[0, 0]] + [list(span) for span in spans] + [[0, 0]]
            return 200, answer
        window = body.get("window")
        end = None
        if window is not None:
            end = len(body["text"]) if len(spans) <= window - 2 else spans[window - 2][0]
        return 200, {"tokens": len(spans) + 2, "window": 512, "window_end_char": end}


class _Handler(BaseHTTPRequestHandler):
    server: FakeEmbeddingServer
    # Headers and body go out in two writes; with Nagle's algorithm the second waits for a delayed ACK.
    disable_nagle_algorithm = True

    def log_message(self, format, *args) -> None:  # noqa: A002 - the stdlib's name
        pass

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.loads(raw)
        self.server.requests.append((self.path, body, dict(self.headers)))
        with self.server._flight:
            self.server.in_flight += 1
            self.server.most_in_flight = max(self.server.most_in_flight, self.server.in_flight)
        self._landed = False
        try:
            self._answer(body)
        finally:
            self._land()

    def _land(self) -> None:
        # A request stops being in flight once its answer is ready, before the answer is sent: the
        # client may send its next request the moment it reads this one, and counting until after
        # the write would see both at once.
        if not self._landed:
            self._landed = True
            with self.server._flight:
                self.server.in_flight -= 1

    def _answer(self, body: dict) -> None:
        if self.path == "/v1/embeddings":
            time.sleep(self.server.embedding_delay)
        queue = self.server.scripts.get(self.path)
        if queue:
            scripted = queue.popleft()
            time.sleep(scripted.delay)
            status = scripted.status
            payload = scripted.body if scripted.body is not None else self.server.answer(self.path, body)[1]
        else:
            status, payload = self.server.answer(self.path, body)
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self._land()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def server():
    fake = FakeEmbeddingServer()
    thread = threading.Thread(target=fake.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    yield fake
    fake.shutdown()
    fake.server_close()


def make(server: FakeEmbeddingServer, **options) -> HttpEmbedder:
    options = {"model": "test-model", "timeout": 1.0, "backoff": 0.01} | options
    return HttpEmbedder(server.url, **options)


# -- embedding -------------------------------------------------------------------------------


def test_embeds_in_input_order_as_unit_vectors_with_usage(server):
    server.reverse_order = True
    embedder = make(server)
    texts = ["alpha beta", "gamma", "delta epsilon zeta"]
    result = embedder.embed_with_usage(texts)
    assert result.vectors.dtype == np.float32
    assert result.vectors.shape == (3, 8)
    assert np.allclose(np.linalg.norm(result.vectors, axis=1), 1.0, atol=1e-6)
    expected = np.asarray(_vector("gamma", 8))
    assert np.allclose(result.vectors[1], expected / np.linalg.norm(expected), atol=1e-6)
    assert result.tokens == 4 + 3 + 5
    assert server.calls("/v1/embeddings") == [{"model": "test-model", "input": texts}]


def test_batches_by_batch_size_and_sums_usage(server):
    embedder = make(server, batch_size=2)
    result = embedder.embed_with_usage(["a", "b", "c", "d", "e"])
    assert [call["input"] for call in server.calls("/v1/embeddings")] == [["a", "b"], ["c", "d"], ["e"]]
    assert result.vectors.shape == (5, 8)
    assert result.tokens == 15


def test_tokens_are_unknown_when_the_server_reports_no_usage(server):
    server.with_usage = False
    assert make(server).embed_with_usage(["a"]).tokens is None


def test_sends_the_api_key_as_a_bearer_token_only_when_set(server):
    make(server, api_key="sk-test").embed(["a"])
    make(server).embed(["b"])
    first, second = (headers for _, _, headers in server.requests)
    assert first["Authorization"] == "Bearer sk-test"
    assert "Authorization" not in second


def test_accepts_a_base_url_ending_in_v1(server):
    embedder = build_embedder("http", url=server.url + "/v1/", model="test-model", timeout=1.0)
    assert embedder.embed(["a"]).shape == (1, 8)


def test_dimensions_are_learned_from_the_first_answer(server):
    embedder = make(server)
    embedder.embed(["a"])
    assert embedder.dimensions == 8
    assert len(server.requests) == 1


def test_dimensions_asked_first_cost_one_probe(server):
    embedder = make(server)
    assert embedder.dimensions == 8
    assert server.calls("/v1/embeddings") == [{"model": "test-model", "input": ["dimension probe"]}]
    assert embedder.embed([]).shape == (0, 8)


# -- failures --------------------------------------------------------------------------------


def test_a_server_slower_than_the_timeout_is_an_error_without_retry(server):
    server.script("/v1/embeddings", Scripted(delay=0.4))
    started = time.monotonic()
    with pytest.raises(EmbeddingError, match="did not answer within"):
        make(server, timeout=0.1).embed(["a"])
    assert time.monotonic() - started < 0.35
    assert len(server.calls("/v1/embeddings")) == 1


def test_a_500_then_success_is_retried(server):
    server.script("/v1/embeddings", Scripted(status=500, body={"error": "boom"}))
    assert make(server).embed(["a", "b"]).shape == (2, 8)
    assert len(server.calls("/v1/embeddings")) == 2


def test_a_persistent_500_fails_after_three_tries(server):
    server.script("/v1/embeddings", *[Scripted(status=500, body={"error": "boom"})] * 3)
    with pytest.raises(EmbeddingError, match=r"HTTP 500 \(after 3 tries\)") as caught:
        make(server).embed(["a"])
    assert len(server.calls("/v1/embeddings")) == 3
    assert "127.0.0.1" not in str(caught.value)


def test_a_429_is_retried(server):
    server.script("/v1/embeddings", Scripted(status=429, body={"error": "slow down"}))
    assert make(server).embed(["a"]).shape == (1, 8)
    assert len(server.calls("/v1/embeddings")) == 2


def test_backoff_doubles_between_tries(server):
    server.script("/v1/embeddings", *[Scripted(status=503, body={})] * 2)
    started = time.monotonic()
    make(server, backoff=0.05).embed(["a"])
    assert time.monotonic() - started >= 0.05 + 0.1


def test_a_client_error_is_not_retried(server):
    server.script("/v1/embeddings", Scripted(status=400, body={"error": "bad model"}))
    with pytest.raises(EmbeddingError, match="HTTP 400"):
        make(server).embed(["a"])
    assert len(server.calls("/v1/embeddings")) == 1


def test_an_unreachable_server_fails_after_retries(server):
    url = server.url
    server.shutdown()
    server.server_close()
    with pytest.raises(EmbeddingError, match="could not be reached"):
        HttpEmbedder(url, model="m", timeout=0.5, backoff=0.01).embed(["a"])


def test_a_width_change_between_batches_is_an_error_with_no_partial_result(server):
    embedder = make(server, batch_size=1)
    first = _vector("a", 8)
    server.script(
        "/v1/embeddings",
        Scripted(body={"data": [{"embedding": first, "index": 0}]}),
        Scripted(body={"data": [{"embedding": [0.5] * 6, "index": 0}]}),
    )
    with pytest.raises(EmbeddingError, match="6-dimensional vectors where 8 were expected"):
        embedder.embed(["a", "b"])


def test_a_width_different_from_earlier_calls_is_an_error(server):
    embedder = make(server)
    embedder.embed(["a"])
    server.width = 5
    with pytest.raises(EmbeddingError, match="5-dimensional"):
        embedder.embed(["b"])


def test_malformed_json_is_an_error(server):
    server.script("/v1/embeddings", Scripted(body=b"{not json"))
    with pytest.raises(EmbeddingError, match="malformed JSON"):
        make(server).embed(["a"])


def test_fewer_vectors_than_texts_is_an_error(server):
    server.script("/v1/embeddings", Scripted(body={"data": [{"embedding": [1.0] * 8, "index": 0}]}))
    with pytest.raises(EmbeddingError, match="1 vectors for 2 texts"):
        make(server).embed(["a", "b"])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"vectors": []}, "no 'data' list"),
        ({"data": [{"index": 0}]}, "no 'embedding' list"),
        ({"data": [{"embedding": [1.0, 2.0], "index": 3}]}, "invalid 'index'"),
        ({"data": [{"embedding": [1.0], "index": 0}, {"embedding": [1.0], "index": 0}]}, "2 vectors for 1"),
        ({"data": [{"embedding": ["x", 1.0], "index": 0}]}, "non-numeric"),
        ({"data": [{"embedding": [], "index": 0}]}, "zero widths"),
        ({"data": [{"embedding": [0.0, 0.0], "index": 0}]}, "all-zero"),
        (b'{"data": [{"embedding": [NaN, 1.0], "index": 0}]}', "non-finite"),
    ],
)
def test_invalid_answers_are_errors(server, body, message):
    server.script("/v1/embeddings", Scripted(body=body))
    with pytest.raises(EmbeddingError, match=message):
        make(server).embed(["a"])


# -- token counting --------------------------------------------------------------------------


def test_counts_tokens_with_count_tokens_and_learns_the_window(server):
    embedder = make(server)
    assert embedder.count_tokens("three little words") == 5
    assert server.calls("/count_tokens") == [{"text": "three little words"}]
    assert embedder.window == 512


def test_counts_tokens_with_tokenize_when_count_tokens_is_not_offered(server):
    server.offered.discard("/count_tokens")
    embedder = make(server)
    assert embedder.count_tokens("three little words") == 5
    assert embedder.count_tokens("two words") == 4
    assert len(server.calls("/count_tokens")) == 1  # a 404 is remembered
    assert server.calls("/v1/tokenize")[0] == {"model": "test-model", "input": "three little words"}


def test_counting_is_unknown_when_neither_endpoint_is_offered(server):
    server.offered = {"/v1/embeddings"}
    embedder = make(server)
    assert embedder.count_tokens("text") is None
    assert embedder.count_tokens("text") is None
    assert embedder.window_end_char("text", 10) is None
    assert embedder.token_spans("text") is None
    assert embedder.window is None
    assert len(server.requests) == 2  # each optional endpoint was asked once


def test_token_ids_come_from_tokenize(server):
    embedder = make(server)
    assert embedder.token_ids("ab cd") == [101, 1000, 1001, 102]
    server.offered.discard("/v1/tokenize")
    assert make(server).token_ids("ab cd") is None


def test_token_spans_come_from_tokenize_offsets_without_special_tokens(server):
    embedder = make(server)
    assert embedder.token_spans(" ab  cd") == [(1, 3), (5, 7)]
    server.with_offsets = False
    assert embedder.token_spans(" ab  cd") is None


def test_window_end_char_comes_from_count_tokens(server):
    embedder = make(server)
    assert embedder.window_end_char("one two three four", 4) == len("one two ")
    assert embedder.window_end_char("one two", 4) == len("one two")
    assert server.calls("/count_tokens")[0] == {"text": "one two three four", "window": 4}


def test_window_end_char_outside_the_text_is_an_error(server):
    server.script("/count_tokens", Scripted(body={"tokens": 3, "window": 512, "window_end_char": 99}))
    with pytest.raises(EmbeddingError, match="window_end_char"):
        make(server).window_end_char("short", 3)


def test_window_is_unknown_while_the_server_is_unreachable(server):
    embedder = make(server, timeout=0.2)
    server.script("/count_tokens", *[Scripted(status=503, body={})] * 3)
    assert embedder.window is None
    assert embedder.window == 512  # asked again once the server answers


# -- concurrency ------------------------------------------------------------------------------


@pytest.mark.parametrize("concurrency", [1, 2, 4])
def test_sends_embed_concurrency_requests_at_once_and_keeps_input_order(server, concurrency):
    server.embedding_delay = 0.15  # long enough that requests sent together overlap at the server
    texts = [f"text number {i}" for i in range(20)]
    started = time.perf_counter()
    one_at_a_time = make(server, batch_size=2).embed_with_usage(texts)
    sequential = time.perf_counter() - started
    server.most_in_flight = 0
    started = time.perf_counter()
    result = make(server, batch_size=2, concurrency=concurrency).embed_with_usage(texts)
    elapsed = time.perf_counter() - started
    assert server.most_in_flight == concurrency
    assert np.array_equal(result.vectors, one_at_a_time.vectors) and result.tokens == one_at_a_time.tokens
    if concurrency > 1:  # 10 batches of 0.15 s: 1.5 s one at a time, 0.75 s two at a time, 0.45 s four
        assert elapsed < 0.8 * sequential


def test_never_more_requests_in_flight_than_batches(server):
    server.embedding_delay = 0.1
    make(server, batch_size=4, concurrency=8).embed(["a", "b", "c", "d", "e", "f"])
    assert server.most_in_flight == 2


def test_a_failing_batch_among_concurrent_ones_fails_the_whole_call(server):
    server.script("/v1/embeddings", Scripted(), Scripted(status=400), Scripted(), Scripted())
    with pytest.raises(EmbeddingError, match="HTTP 400"):
        make(server, batch_size=1, concurrency=4).embed(["a", "b", "c", "d"])


def test_the_factory_passes_the_concurrency_and_refuses_less_than_one(server):
    from django.core.exceptions import ImproperlyConfigured

    embedder = build_embedder("http", url=server.url, model="m", concurrency=3)
    assert embedder._concurrency == 3
    with pytest.raises(ImproperlyConfigured, match="EMBED_CONCURRENCY"):
        build_embedder("http", url=server.url, model="m", concurrency=0)
