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
