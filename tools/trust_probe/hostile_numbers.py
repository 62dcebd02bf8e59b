"""tools/trust_probe/probe.py's hostile-numbers family (issue 39, finding 3): integers past a double's range
or past ±2**53, and non-finite floats, in every number a client sends — search fields and filters on the
API, ranking options and filters on /v1, memory recall and listing, MCP tool arguments, ids in paths — and
in a sidecar of a synced folder.

failed = a 5xx, an MCP internal error, a hostile number taken as if it were one (a 200 where a 400 is due),
or a body refusal that does not name its field; leaked = a traceback or the deployment folder in an answer.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tools.trust_probe.world import Tally, http_client

HUGE = "1" + "0" * 400  # past a double's range: float() of it overflows
# As JSON texts: each must be refused wherever a number is read.
VALUES = {
    "huge": HUGE,
    "-huge": "-" + HUGE,
    "2**53+1": str(2**53 + 1),
    "-(2**53+1)": str(-(2**53 + 1)),
    "1e999": "1e999",
    "-1e999": "-1e999",
    "NaN": "NaN",
    "Infinity": "Infinity",
}
MARK = "__NUMBER__"


def _body(template: dict, value: str) -> str:
    """The template as JSON with the value's own text where MARK stands (json.dumps cannot write 1e999)."""
    return json.dumps(template).replace(json.dumps(MARK), value)


def _leaked(text: str, world: dict) -> bool:
    return "Traceback" in text or 'File "/' in text or world["folder"] in text


# (surface, path, template, the field name the refusal must carry)
BODIES = [
    ("api search most", "/api/v1/collections/alpha/search", {"question": "leave", "most": MARK}, "most"),
    (
        "api search around",
        "/api/v1/collections/alpha/search",
        {"question": "leave", "around": MARK},
        "around",
    ),
    (
        "api search min_score",
        "/api/v1/collections/alpha/search",
        {"question": "leave", "min_score": MARK},
        "min_score",
    ),
    (
        "api search max_chars",
        "/api/v1/collections/alpha/search",
        {"question": "leave", "max_chars": MARK},
        "max_chars",
    ),
    (
        "api filter eq",
        "/api/v1/collections/alpha/search",
        {"question": "leave", "filters": {"type": "gt", "key": "year", "value": MARK}},
        "filters",
    ),
    (
        "api filter in",
        "/api/v1/collections/alpha/search",
        {
            "question": "leave",
            "filters": {"type": "or", "filters": [{"type": "in", "key": "year", "value": [1, MARK]}]},
        },
        "filters",
    ),
    (
        "v1 max_num_results",
        "/v1/vector_stores/alpha/search",
        {"query": "leave", "max_num_results": MARK},
        "max_num_results",
    ),
    (
        "v1 score_threshold",
        "/v1/vector_stores/alpha/search",
        {"query": "leave", "ranking_options": {"score_threshold": MARK}},
        "score_threshold",
    ),
    (
        "v1 embedding_weight",
        "/v1/vector_stores/alpha/search",
        {
            "query": "leave",
            "ranking_options": {"hybrid_search": {"embedding_weight": MARK, "text_weight": 1}},
        },
        "embedding_weight",
    ),
    (
        "v1 filter",
        "/v1/vector_stores/alpha/search",
        {"query": "leave", "filters": {"type": "lte", "key": "year", "value": MARK}},
        "filters",
    ),
    ("recall most", "/api/v1/memory/recall", {"question": "vault", "most": MARK}, "most"),
    ("recall max_chars", "/api/v1/memory/recall", {"question": "vault", "max_chars": MARK}, "max_chars"),
]
# (tool, arguments): every number an MCP tool takes.
TOOLS = [
    ("search", {"collection": "alpha", "question": "leave", "most": MARK}),
    ("search", {"collection": "alpha", "question": "leave", "min_score": MARK}),
    ("search", {"collection": "alpha", "question": "leave", "max_chars": MARK}),
    ("search", {"collection": "alpha", "question": "leave", "around": MARK}),
    (
        "search",
        {"collection": "alpha", "question": "leave", "filters": {"type": "eq", "key": "y", "value": MARK}},
    ),
    ("recall", {"question": "vault", "most": MARK}),
    ("recall", {"question": "vault", "max_chars": MARK}),
    ("list_records", {"limit": MARK}),
    ("read_record", {"kind": "mem", "id": MARK}),
    ("change_record", {"kind": "mem", "id": MARK, "tags": ["x"]}),
    ("build_status", {"collection": "alpha", "build": MARK}),
    ("build_status", {"collection": "alpha", "wait_seconds": MARK}),
]
# Numbers in a path or a query string: a 4xx (a missing object or a refusal), never a 5xx.
PATHS = [
    "/api/v1/collections/alpha/builds/{}",
    "/api/v1/memory/records/mem/{}",
    "/api/v1/memory/nodes/mem/{memory}/{}",
    "/api/v1/collections/alpha/paragraph?chunk_id=leave.md%23{}",
    "/api/v1/memory/memories?limit={}",
]


def numbers(tally: Tally, base: str, world: dict, scratch: Path) -> None:
    from ragsite.mcp.protocol import LATEST_LEGACY

    headers = {"Authorization": f"Bearer {world['a_key']}", "Content-Type": "application/json"}
    mcp_headers = {
        **headers,
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": LATEST_LEGACY,
    }
    with http_client() as http:
        for surface, path, template, field in BODIES:
            for name, value in VALUES.items():
                response = http.post(base + path, content=_body(template, value), headers=headers)
                try:
                    error = response.json().get("error") or {}
                except ValueError:
                    error = {}
                # A body with NaN or Infinity is not JSON: refused whole, as malformed_json. /v1 answers in
                # OpenAI's shape, which names the field in `param`.
                named = field in error.get("message", "") + str(error.get("param", ""))
                shape = {"code", "message"} <= set(error) and (path.startswith("/v1/") or len(error) == 2)
                if value in ("NaN", "Infinity"):
                    named = error.get("code") == "malformed_json"
                tally.count(
                    "numbers",
                    failed=response.status_code != 400 or not shape or not named,
                    leaked=_leaked(response.text, world),
                    note=f"{surface} {name}: {response.status_code} {response.text[:160]}",
                )
        for number, (tool, arguments) in enumerate(TOOLS):
            for name, value in VALUES.items():
                message = {
                    "jsonrpc": "2.0",
                    "id": number,
                    "method": "tools/call",
                    "params": {"name": tool, "arguments": arguments},
                }
                response = http.post(base + "/mcp", content=_body(message, value), headers=mcp_headers)
                refused = False
                try:
                    answer = response.json()
                    if "error" in answer:  # a JSON-RPC refusal: invalid params, or a body not JSON
                        refused = answer["error"]["code"] in (-32602, -32700)
                    else:
                        result = answer["result"]
                        code = result["structuredContent"]["error"]["code"] if result.get("isError") else ""
                        # An id no object can have names none: the tool's "unknown" answer, as a path's 404.
                        refused = code.startswith("invalid_") or (
                            code.startswith("unknown_") and set(arguments) & {"id", "build"}
                        )
                except (ValueError, KeyError, TypeError):
                    pass
                tally.count(
                    "numbers",
                    failed=response.status_code >= 500 or not refused,
                    leaked=_leaked(response.text, world),
                    note=f"mcp {tool} {sorted(arguments)} {name}: "
                    f"{response.status_code} {response.text[:140]}",
                )
        for template in PATHS:
            for name in ("huge", "-huge", "2**53+1", "1e999", "NaN"):
                url = base + template.format(VALUES[name], memory=world["memory"])
                response = http.get(url, headers={"Authorization": headers["Authorization"]})
                kind = response.headers.get("content-type", "")
                tally.count(
                    "numbers",
                    failed=response.status_code >= 500 or not kind.startswith("application/json"),
                    leaked=_leaked(response.text, world),
                    note=f"GET {template} {name}: {response.status_code} {response.text[:120]}",
                )
    _sidecars(tally, base, world, scratch)


def _sidecars(tally: Tally, base: str, world: dict, scratch: Path) -> None:
    """A synced folder whose sidecar holds a huge number: the sync check and its build go on, that one
    document's attributes are refused by name, and the other's integer stays an integer."""
    from collections_app.models import BuildRun, Document
    from collections_app.services import sync, sync_check
    from collections_app.services.agents import create_collection, get_agent

    folder = scratch / "deployment-secret-folder" / "numbers"
    folder.mkdir()
    (folder / "leave.md").write_text("# Leave\n\nStaff carry over five days of leave.\n")
    (folder / "leave.md.meta.json").write_text('{"team": "hr", "year": 2022}')
    (folder / "travel.md").write_text("# Travel\n\nMileage is paid at 0.42 per kilometre.\n")
    (folder / "travel.md.meta.json").write_text('{"team": "finance", "year": ' + HUGE + "}")
    os.environ["KNOWLEDGE_AGENT_A__NUMBERS_FOLDER"] = str(folder)
    collection = create_collection(agent=get_agent("agent-a"), name="numbers", method="structure")
    sync.set_sync(collection=collection, every=1)
    check = sync_check.check_source(collection=collection)
    run = check.build
    if run is not None:
        run.refresh_from_db()
    attributes = dict(Document.objects.filter(collection=collection).values_list("name", "attributes"))
    warned = run is not None and any("travel.md.meta.json" in w and "'year'" in w for w in run.warnings)
    tally.count(
        "numbers",
        failed=run is None
        or run.status != BuildRun.SUCCEEDED
        or attributes.get("travel.md") != {}
        or attributes.get("leave.md") != {"team": "hr", "year": 2022}
        or not warned,
        leaked=run is not None and _leaked(json.dumps([run.error, run.warnings]), world),
        note=f"sidecar: {check.outcome[:120]} {run and run.status} {attributes}",
    )
    again = sync_check.check_source(collection=collection)  # unchanged: no failure, no build
    tally.count(
        "numbers",
        failed=again.build is not None or "fail" in again.outcome.lower(),
        note=f"sidecar, checked again: {again.outcome[:160]}",
    )
    with http_client() as http:
        page = http.post(
            base + "/v1/vector_stores/numbers/search",
            json={"query": "carry over leave", "ranking_options": {"score_threshold": 0}},
            headers={"Authorization": f"Bearer {world['a_key']}"},
        )
    years = [r["attributes"].get("year") for r in page.json().get("data", []) if r["filename"] == "leave.md"]
    tally.count(
        "numbers",
        failed=page.status_code != 200 or not years or any(type(y) is not int for y in years),
        note=f"sidecar integers: {page.status_code} {years}",
    )
