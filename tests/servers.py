"""Small real HTTP servers on 127.0.0.1 that speak the protocols ragsite calls out to."""

import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet handler that answers JSON."""

    def log_message(self, *args):
        pass

    def _send(self, status, payload):
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)


class JudgeServer:
    """An OpenAI-compatible /v1/chat/completions endpoint with a chosen behaviour.

    `mode`: "approve", "refuse", "slow" (sleeps past any sane timeout), "garbage"
    (prose instead of JSON), "error" (HTTP 500).
    """

    def __init__(self):
        self.mode = "approve"
        self.requests: list[dict] = []
        server = self

        class Handler(JsonHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                server.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": "no such route"})
                if server.mode == "slow":
                    time.sleep(2)
                if server.mode == "error":
                    return self._send(500, {"error": "boom"})
                content = {
                    "approve": '{"answers": true}',
                    "refuse": '{"answers": false}',
                    "garbage": "I think these paragraphs probably help.",
                    "slow": '{"answers": true}',
                }[server.mode]
                self._send(
                    200,
                    {
                        "id": "chatcmpl-1",
                        "object": "chat.completion",
                        "model": body.get("model", "judge"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": content},
                                "finish_reason": "stop",
                            }
                        ],
                        "usage": {"prompt_tokens": 120, "completion_tokens": 6, "total_tokens": 126},
                    },
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


class RerankServer:
    """A reranking endpoint in both dialects ragsite reads, scoring by a chosen word.

    ``POST /v1/rerank`` answers as Cohere and Jina do (``{"results": [{"index",
    "relevance_score"}], "usage": {"total_tokens"}}``) and ``POST /rerank`` as text-embeddings-
    inference does (``[{"index", "score"}]``). A document scores 0.9 when it contains
    ``favourite`` and 0.1 otherwise, so a test can choose which paragraph the reranker prefers.
    `mode`: "ok", "slow" (sleeps past any sane timeout), "error" (HTTP 500), "garbage" (an index
    that was never sent), "partial" (one document left out).
    """

    def __init__(self, favourite: str = ""):
        self.mode = "ok"
        self.favourite = favourite
        self.requests: list[dict] = []
        self.during = None  # a test's probe, called while each request is being answered
        server = self

        class Handler(JsonHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                server.requests.append(
                    {"path": self.path, "body": body, "auth": self.headers.get("Authorization")}
                )
                if server.during is not None:
                    server.during()
                if self.path not in ("/v1/rerank", "/rerank"):
                    return self._send(404, {"error": "no such route"})
                if server.mode == "slow":
                    time.sleep(2)
                if server.mode == "error":
                    return self._send(500, {"error": "boom"})
                texts = body["documents"] if self.path == "/v1/rerank" else body["texts"]
                scored = [
                    (i, 0.9 if server.favourite and server.favourite in t.lower() else 0.1)
                    for i, t in enumerate(texts)
                ]
                scored.sort(key=lambda pair: -pair[1])
                if server.mode == "garbage":
                    scored[0] = (len(texts) + 3, scored[0][1])
                if server.mode == "partial":
                    scored = scored[:-1]
                if self.path == "/rerank":
                    return self._send(200, [{"index": i, "score": s} for i, s in scored])
                self._send(
                    200,
                    {
                        "model": body.get("model", "rerank"),
                        "results": [{"index": i, "relevance_score": s} for i, s in scored],
                        "usage": {"total_tokens": 10 * len(texts)},
                    },
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"


@contextmanager
def serving(server):
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()


class WebhookReceiver:
    """A webhook receiver: records every POST (headers and body) and answers the next status in `statuses`
    (200 once they run out), so a test can make the first attempt fail."""

    def __init__(self, statuses=()):
        self.statuses = list(statuses)
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        server = self

        class Handler(JsonHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                with server.lock:
                    server.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                    status = server.statuses.pop(0) if server.statuses else 200
                self._send(status, {"ok": status == 200})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
