"""OpenTelemetry: with OTEL_EXPORTER_OTLP_ENDPOINT set, a search is one trace (its plan, embed, rank,
rerank, stitch and judge spans children of the search's) exported over OTLP/HTTP to a collector; here a
real HTTP receiver on 127.0.0.1 that decodes the protobuf requests. No question or text in any span."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from collections_app.services.agents import create_agent, create_collection
from collections_app.services.builds import build_collection
from ragsite import tracing
from tests.conftest import HANDBOOK

QUESTION = "pelican-quartz how many days of annual leave carry over"


class Collector:
    """Accepts POST /v1/traces (OTLP/HTTP, protobuf) and keeps every span."""

    def __init__(self):
        self.spans, collector = [], self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource in request.resource_spans:
                    for scope in resource.scope_spans:
                        collector.spans.extend(scope.spans)
                self.send_response(200 if self.path == "/v1/traces" else 404)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def collector():
    served = Collector()
    assert tracing.configure(served.url)
    yield served
    tracing.configure("")
    served.server.shutdown()


def test_a_search_is_one_trace_with_its_steps_as_children(client, db, knowledge_folder, collector):
    agent, raw = create_agent(agent_id="traced", name="Traced")
    knowledge_folder("handbook", HANDBOOK, agent="traced")
    assert build_collection(collection=create_collection(agent=agent, name="handbook")).status == "succeeded"
    response = client.post(
        "/api/v1/collections/handbook/search",
        data=json.dumps({"question": QUESTION}),
        content_type="application/json",
        headers={"Authorization": f"Bearer {raw}"},
    )
    assert response.status_code == 200
    tracing.flush()
    [root] = [span for span in collector.spans if span.name == "search"]
    children = [span for span in collector.spans if span.parent_span_id == root.span_id]
    assert {span.name for span in children} == {"plan", "embed", "rank", "rerank", "stitch", "judge"}
    assert all(span.trace_id == root.trace_id for span in children)
    attributes = {a.key: a.value for a in root.attributes}
    assert attributes["ragsite.mode"].string_value == response.json()["mode"]
    assert attributes["ragsite.paragraphs"].int_value == len(response.json()["paragraphs"])
    everything = str([list(span.attributes) for span in collector.spans]) + str(
        [s.name for s in collector.spans]
    )
    assert "pelican" not in everything and "Carry-over" not in everything


def test_without_the_endpoint_nothing_is_recorded(client, db):
    assert tracing.configure("") is False
    with tracing.span("search") as span:
        assert not span.is_recording() and tracing.current_trace_id() == ""


def test_a_build_queued_by_a_request_continues_its_trace_in_the_worker(
    client, db, knowledge_folder, collector, django_capture_on_commit_callbacks, monkeypatch
):
    """The request that queues a build is a span; the queued task carries its W3C trace context in its
    arguments, and the worker's `task` span is its child, with the `build` span and its read, extract,
    chunk, embed and write steps under it, in the same trace. The task runs here as a worker runs it:
    taken from the broker and called after the request is over, so only what it carries links them."""
    import importlib

    from django_q.brokers import get_broker
    from django_q.conf import Conf
    from django_q.signing import SignedPackage

    monkeypatch.setattr(Conf, "SYNC", False)  # queued for a worker, not run inside the request
    agent, raw = create_agent(agent_id="traced", name="Traced")
    knowledge_folder("handbook", HANDBOOK, agent="traced")
    create_collection(agent=agent, name="handbook")
    with django_capture_on_commit_callbacks(execute=True):
        queued = client.post("/api/v1/collections/handbook/build", headers={"Authorization": f"Bearer {raw}"})
    assert queued.status_code == 202, queued.content
    broker = get_broker()
    [(ack, payload)] = broker.dequeue()
    task = SignedPackage.loads(payload)
    assert set(task["kwargs"]["trace"]) <= {"traceparent", "tracestate"} and task["kwargs"]["trace"]
    module, _, name = task["func"].rpartition(".")
    assert getattr(importlib.import_module(module), name)(*task["args"], **task["kwargs"]) == "succeeded"
    broker.acknowledge(ack)
    tracing.flush()

    [request] = [s for s in collector.spans if s.name == "request"]
    [worker] = [s for s in collector.spans if s.name == "task"]
    [build] = [s for s in collector.spans if s.name == "build"]
    assert worker.parent_span_id == request.span_id and build.parent_span_id == worker.span_id
    assert request.trace_id == worker.trace_id == build.trace_id
    steps = [s for s in collector.spans if s.parent_span_id == build.span_id]
    assert {s.name for s in steps} == {"read", "extract", "chunk", "embed", "write"}
    assert sum(s.name == "read" for s in steps) == len(HANDBOOK)
    attributes = {a.key: a.value for a in build.attributes}
    assert attributes["ragsite.outcome"].string_value == "succeeded"
    assert attributes["ragsite.documents_read"].int_value == len(HANDBOOK)
    route = {a.key: a.value for a in request.attributes}["http.route"].string_value
    assert "build" in route and "handbook" not in route  # the pattern, never the path asked for
    everything = str([list(s.attributes) for s in collector.spans]) + str([s.name for s in collector.spans])
    assert not any(word in everything for word in ("leave.md", "Carry-over", "Laptops", "Mileage"))


def test_a_request_continues_its_callers_trace(client, db, collector):
    caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    client.get("/api/v1/collections", headers={"traceparent": caller})
    tracing.flush()
    [request] = [s for s in collector.spans if s.name == "request"]
    assert request.trace_id.hex() == "0af7651916cd43dd8448eb211c80319c"
    assert request.parent_span_id.hex() == "b7ad6b7169203331"


def _queued_tasks() -> tuple[list[tuple[str, str]], list[str]]:
    """Every task the apps queue through `ragsite.queue.enqueue` (module, the task's dotted path), and
    every module that calls django-q2's `async_task` itself (which would skip the trace)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    found, by_hand = [], []
    for app in ("collections_app", "memory_app"):
        for path in sorted((root / app).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if not isinstance(node, ast.Call):
                    continue
                called = getattr(node.func, "id", "") or getattr(node.func, "attr", "")
                if called == "async_task":
                    by_hand.append(str(path.relative_to(root)))
                elif called == "enqueue" and getattr(node.func, "value", None) is not None:
                    first = node.args[0] if node.args else None
                    target = first.value if isinstance(first, ast.Constant) else "?"
                    found.append((str(path.relative_to(root)), target))
    return found, by_hand


def test_every_queued_task_carries_and_continues_the_trace_of_who_queued_it():
    """A task queued other than through `ragsite.queue.enqueue` (which carries the trace), or a task that
    does not continue the trace it is given, fails here."""
    import importlib

    queued, by_hand = _queued_tasks()
    assert len(queued) >= 7
    assert by_hand == []
    for _module, target in queued:
        module, _, name = target.rpartition(".")
        task = getattr(importlib.import_module(module), name)
        assert getattr(task, "__wrapped__", None) is not None, f"{target} is not @tracing.continues_trace"


def test_a_stored_memorys_node_task_continues_the_requests_trace(
    client, db, collector, django_capture_on_commit_callbacks, monkeypatch
):
    import importlib

    from django_q.brokers import get_broker
    from django_q.conf import Conf
    from django_q.signing import SignedPackage

    monkeypatch.setattr(Conf, "SYNC", False)
    _agent, raw = create_agent(agent_id="traced", name="Traced")
    long_text = " ".join(f"word{i} of a long memory about the harbour" for i in range(300))
    with django_capture_on_commit_callbacks(execute=True):
        stored = client.post(
            "/api/v1/memory/memories",
            data=json.dumps({"text": long_text}),
            content_type="application/json",
            headers={"Authorization": f"Bearer {raw}"},
        )
    assert stored.status_code in (200, 201), stored.content
    broker = get_broker()
    while (task := broker.dequeue()) is not None:
        [(ack, payload)] = task
        queued = SignedPackage.loads(payload)
        module, _, name = queued["func"].rpartition(".")
        getattr(importlib.import_module(module), name)(*queued["args"], **queued["kwargs"])
        broker.acknowledge(ack)
    tracing.flush()
    [request] = [s for s in collector.spans if s.name == "request"]
    tasks = [s for s in collector.spans if s.name == "task"]
    assert tasks and all(s.parent_span_id == request.span_id for s in tasks)
    named = {{a.key: a.value for a in s.attributes}["ragsite.task"].string_value for s in tasks}
    assert "build_record_nodes" in named
    assert "harbour" not in str([list(s.attributes) for s in collector.spans])
