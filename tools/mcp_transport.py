"""Compare ragsite's own MCP transport with the official SDK's server, serving the same tools.

The prototype below builds the SDK's low-level `Server` over ragsite's tool registry (the same
`Tool` objects, schemas and handlers that `/mcp` serves), runs it with
`streamable_http_app(stateless_http=True, json_response=True)` mounted beside Django in one ASGI
application, and serves that with uvicorn. The hand-written transport is served by uvicorn too
(`config.asgi`). Both are then driven, in this process, by the official Python SDK client through
the scenario the test suite uses (initialize, tools/list, a search that answers, one for an unknown
collection, one with an argument out of range) plus the 2026-07-28 stateless era that `mcp.Client`
tries first, and timed over repeated searches. Lines of code are counted for each side.

Run:  .venv/bin/python tools/mcp_transport.py [--calls 200]

Loopback only; both servers stop when the run ends. docs/decisions/0014 records the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def setup_django(data_dir: str) -> str:
    """A scratch store with one agent and the sample handbook built with the hash embedder; its key."""
    os.environ.update(
        DJANGO_SETTINGS_MODULE="config.settings",
        DATA_DIR=data_dir,
        EMBED_BACKEND="hash",
        DATABASE_URL=f"sqlite:///{data_dir}/bench.sqlite3",
        DEBUG="true",
        KNOWLEDGE_HANDBOOK_FOLDER=str(ROOT / "collections_app" / "sample_docs"),
    )
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from collections_app.services.agents import create_agent, create_collection
    from collections_app.services.builds import build_collection

    agent, raw = create_agent(agent_id="bench", name="Bench")
    collection = create_collection(agent=agent, name="handbook", method="structure")
    assert build_collection(collection=collection).status == "succeeded"
    return raw


def sdk_application():
    """The prototype: the SDK's server over ragsite's registry, mounted beside Django at /mcp."""
    import mcp_types as types
    from asgiref.sync import sync_to_async
    from django.core.asgi import get_asgi_application
    from mcp.server.lowlevel import Server

    from ragsite.errors import RagsiteError, error_body
    from ragsite.mcp import TOOLS, Caller, InvalidArguments, authenticated_key, check_arguments

    class _Request:  # what the authenticator reads: the (case-insensitive) headers
        def __init__(self, headers):
            self.headers = headers

    async def list_tools(ctx, params):
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=t.name,
                    title=t.title,
                    description=t.description,
                    input_schema=t.input_schema,
                    output_schema=None,
                )
                for t in TOOLS.values()
            ]
        )

    def _call(headers, name, arguments):
        key = authenticated_key(_Request(headers))
        if key is None:
            return {"error": {"code": "unauthorized", "message": "a valid API key is required"}}, True
        tool = TOOLS[name]
        try:
            return tool.handler(
                Caller(agent=key.agent, key=key), check_arguments(tool.input_schema, arguments)
            ), False
        except (InvalidArguments, RagsiteError) as exc:
            return error_body(exc.code, exc.message), True

    async def call_tool(ctx, params):
        payload, failed = await sync_to_async(_call)(ctx.request.headers, params.name, params.arguments or {})
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(payload, default=str))],
            structured_content=payload,
            is_error=failed,
        )

    server = Server("ragsite", on_list_tools=list_tools, on_call_tool=call_tool)
    mcp_app = server.streamable_http_app(stateless_http=True, json_response=True, streamable_http_path="/mcp")
    django_app = get_asgi_application()

    async def application(scope, receive, send):
        if scope["type"] == "lifespan" or scope.get("path", "").startswith("/mcp"):
            await mcp_app(scope, receive, send)
        else:
            await django_app(scope, receive, send)

    return application


def serve(app, port: int):
    import uvicorn

    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", lifespan="auto")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            return server
        time.sleep(0.05)
    raise SystemExit("server did not start")


async def scenario(url: str, key: str, calls: int) -> dict:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    checks = {}
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        init = await session.initialize()
        checks["protocol"] = init.protocol_version
        tools = await session.list_tools()
        checks["tools listed"] = {"search", "build"} <= {t.name for t in tools.tools}
        found = await session.call_tool(
            "search", {"collection": "handbook", "question": "laptop", "min_score": 0}
        )
        checks["search answers"] = not found.is_error and bool(found.structured_content.get("paragraphs"))
        missing = await session.call_tool("search", {"collection": "nope", "question": "x"})
        checks["unknown collection is a tool error"] = (
            missing.is_error and missing.structured_content["error"]["code"] == "unknown_collection"
        )
        wrong = await session.call_tool("search", {"collection": "handbook", "question": "x", "most": 99})
        checks["out-of-range argument refused"] = (
            wrong.is_error and wrong.structured_content["error"]["code"] == "invalid_arguments"
        )
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            await session.call_tool("search", {"collection": "handbook", "question": "carry over leave"})
            times.append(time.perf_counter() - started)
    checks["search p50 ms"] = round(1000 * statistics.median(times), 2)
    checks["search p95 ms"] = round(1000 * sorted(times)[int(0.95 * len(times)) - 1], 2)
    return checks


async def modern_era(url: str, key: str) -> str:
    """What `mcp.Client` (which tries 2026-07-28's stateless `server/discover` first) ends up speaking."""
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        result = await client.call_tool("search", {"collection": "handbook", "question": "laptop"})
        assert not result.is_error
        return client.protocol_version if hasattr(client, "protocol_version") else "ok"


def lines_of_code(paths) -> int:
    return sum(
        1
        for p in paths
        for line in Path(p).read_text().splitlines()
        if line.strip() and not line.strip().startswith("#")
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data_dir:
        key = setup_django(data_dir)
        from config.asgi import application as own_application

        ports = {"own transport (config.asgi)": _free_port(), "SDK prototype": _free_port()}
        servers = [
            serve(own_application, ports["own transport (config.asgi)"]),
            serve(sdk_application(), ports["SDK prototype"]),
        ]
        try:
            for name, port in ports.items():
                url = f"http://127.0.0.1:{port}/mcp"
                checks = asyncio.run(scenario(url, key, args.calls))
                try:
                    checks["mcp.Client (tries 2026-07-28 first)"] = asyncio.run(modern_era(url, key))
                except Exception as exc:  # a failure is a finding, not a crash
                    checks["mcp.Client (tries 2026-07-28 first)"] = f"failed: {type(exc).__name__}"
                print(f"## {name}")
                for check, value in checks.items():
                    print(f"  {check}: {value}")
        finally:
            for server in servers:
                server.should_exit = True
    own = lines_of_code(sorted((ROOT / "ragsite" / "mcp").glob("*.py")))
    transport = lines_of_code(
        [ROOT / "ragsite" / "mcp" / "transport.py", ROOT / "ragsite" / "mcp" / "protocol.py"]
    )
    import inspect

    adapter = sum(
        1
        for line in inspect.getsource(sdk_application).splitlines()
        if line.strip() and not line.strip().startswith("#")
    )
    print(
        f"## lines of code (non-blank, non-comment)\n  ragsite/mcp in all: {own}\n  of which the transport "
        f"(transport.py + protocol.py), what the SDK would replace: {transport}\n  the prototype's adapter "
        f"(sdk_application above): {adapter}"
    )


if __name__ == "__main__":
    main()
