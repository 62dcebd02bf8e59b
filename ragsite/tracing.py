"""OpenTelemetry spans, off unless OTEL_EXPORTER_OTLP_ENDPOINT names a collector.

`configure()` (at start, from collections_app's AppConfig.ready) builds a tracer provider exporting
over OTLP/HTTP in batches from a background thread; without the setting every span is a no-op that
costs a function call. `span(name, **attributes)` is what the services use. Attributes are counts,
modes and outcomes: never a question, a paragraph, a reader or a path.

A trace crosses processes as W3C trace context (`traceparent`, `tracestate`): `incoming(headers)`
continues a caller's trace in a request, `carrier()` gives the current span's context to put into a
queued task's arguments, and `continued(name, carrier)` starts the task's span as its child in the
worker, however long after and wherever it runs.
"""

from __future__ import annotations

import functools
from contextlib import contextmanager, nullcontext

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

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


# What `span` gives while nothing is exported: one context manager, reused (it holds no state).
_NO_SPAN = nullcontext(trace.INVALID_SPAN)


def span(name: str, **attributes):
    """A context manager for a span named ``name`` that gives the span (as `with ... as span`)."""
    if _state["provider"] is None:
        # Nothing is exported: a span would be a no-op that still sets and resets the current context
        # (~8 us each, ~60 us of a search's seven; decisions/0094). Nothing reads it: `carrier()` is {} then.
        # Not a generator either: entering and leaving one cost a search's seven spans ~25 us more.
        return _NO_SPAN
    return _state["tracer"].start_as_current_span(name, attributes=attributes or None)


_PROPAGATOR = TraceContextTextMapPropagator()
CARRIED = ("traceparent", "tracestate")


def carrier() -> dict[str, str]:
    """The current span's trace context as W3C headers, to queue with a task; {} when nothing is traced."""
    if _state["provider"] is None:
        return {}
    carried: dict[str, str] = {}
    _PROPAGATOR.inject(carried)
    return carried


def _context_of(carried) -> Context | None:
    if not isinstance(carried, dict):
        return None
    # Only the two W3C fields, as short strings: a carrier comes from a queued task's arguments.
    clean = {k: v for k, v in carried.items() if k in CARRIED and isinstance(v, str) and len(v) <= 512}
    return _PROPAGATOR.extract(clean) if clean else None


@contextmanager
def continued(name: str, carried: dict | None, **attributes):
    """A span continuing the trace `carried` names (a task queued by a traced request), or a new trace."""
    with _state["tracer"].start_as_current_span(
        name, context=_context_of(carried), attributes=attributes or None
    ) as current:
        yield current


def keeping_context(callback):
    """`callback`, to run later (`transaction.on_commit`), in the trace context current now: a task it
    queues then carries the trace of the request that asked for it, even when the commit comes after
    the request's span has ended."""
    saved = otel_context.get_current()

    @functools.wraps(callback)
    def run(*args, **kwargs):
        token = otel_context.attach(saved)
        try:
            return callback(*args, **kwargs)
        finally:
            otel_context.detach(token)

    return run


def continues_trace(task):
    """A django-q task that continues the trace of whoever queued it: its `trace` keyword (what
    `carrier()` gave when it was queued; absent for a scheduled run) becomes the parent of a `task`
    span named for the function, inside which the task runs."""

    @functools.wraps(task)
    def run(*args, trace: dict | None = None, **kwargs):
        with continued("task", trace, **{"ragsite.task": task.__name__}):
            return task(*args, **kwargs)

    return run


def incoming(headers) -> Context | None:
    """The caller's trace context from a request's `traceparent`/`tracestate` headers, if it sent one."""
    return _context_of({k: headers.get(k) for k in CARRIED if headers.get(k) is not None})


@contextmanager
def request_span(headers, **attributes):
    """The span of one HTTP request, continuing the caller's trace when it names one."""
    with _state["tracer"].start_as_current_span(
        "request",
        context=incoming(headers) if _state["provider"] is not None else None,
        kind=trace.SpanKind.SERVER,
        attributes=attributes or None,
    ) as current:
        yield current


def current_trace_id() -> str:
    """The trace id of the span being recorded (32 hex digits), or "" outside one."""
    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else ""
