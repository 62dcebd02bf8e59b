"""Small real HTTP servers on 127.0.0.1 that speak the protocols ragsite calls out to."""

import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class JudgeServer:
    """An OpenAI-compatible /v1/chat/completions endpoint with a chosen behaviour.

    `mode`: "approve", "refuse", "slow" (sleeps past any sane timeout), "garbage"
    (prose instead of JSON), "error" (HTTP 500).
    """

    def __init__(self):
        self.mode = "approve"
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                server.requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
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
                self._send(200, {
                    "id": "chatcmpl-1", "object": "chat.completion", "model": body.get("model", "judge"),
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                 "finish_reason": "stop"}],
                    "usage": {"prompt_tokens": 120, "completion_tokens": 6, "total_tokens": 126},
                })

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
