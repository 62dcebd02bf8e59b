"""OpenTelemetry spans, off unless OTEL_EXPORTER_OTLP_ENDPOINT names a collector.

`configure()` (at start, from collections_app's AppConfig.ready) builds a tracer provider exporting
over OTLP/HTTP in batches from a background thread; without the setting every span is a no-op that
costs a function call. `span(name, **attributes)` is what the services use. Attributes are counts,
modes and outcomes: never a question, a paragraph, a reader or a path.
"""

from __future__ import annotations

from contextlib import contextmanager

from opentelemetry import trace

from ragsite.conf import settings

_state: dict = {"provider": None, "tracer": trace.NoOpTracer()}


def configure(endpoint: str | None = None) -> bool:
    """Export spans to `endpoint` (default OTEL_EXPORTER_OTLP_ENDPOINT); returns whether tracing is on."""
    endpoint = settings.OTEL_EXPORTER_OTLP_ENDPOINT if endpoint is None else endpoint
    previous = _state["provider"]
    if previous is not None:
        previous.shutdown()
    if not endpoint:
        _state["provider"], _state["tracer"] = None, trace.NoOpTracer()
        return False
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    provider = TracerProvider(resource=Resource.create({"service.name": settings.OTEL_SERVICE_NAME}))
    provider.add_span_processor(
        BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{endpoint.rstrip('/')}/v1/traces"))
    )
    _state["provider"], _state["tracer"] = provider, provider.get_tracer("ragsite")
    return True


def flush(timeout_millis: int = 10_000) -> None:
    if _state["provider"] is not None:
        _state["provider"].force_flush(timeout_millis)


@contextmanager
def span(name: str, **attributes):
    with _state["tracer"].start_as_current_span(name, attributes=attributes or None) as current:
        yield current


def current_trace_id() -> str:
    """The trace id of the span being recorded (32 hex digits), or "" outside one."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""
