"""Every error under /api/ and on the embedding endpoints answers in the one JSON shape.

The API's own handlers already do; this catches what answers before or around them: Django's
CSRF failure page, a 405 for a method a route does not take, the development server's or
Django's own HTML error pages. The status is kept; only the body becomes
`{"error": {"code", "message"}}`.
"""

from django.http import HttpResponse, JsonResponse

from ragsite import tracing
from ragsite.errors import error_body, store_busy
from ragsite.logs import reset_request_id, set_request_id
from ragsite.rls import agent_scope, installed

JSON_PREFIXES = ("/api/", "/v1/", "/count_tokens", "/mcp")
CODES = {
    400: ("bad_request", "the request could not be understood"),
    403: ("forbidden", "this request is not allowed"),
    404: ("not_found", "no such API route"),
    405: ("method_not_allowed", "this route does not take that method"),
    413: ("too_large", "the request body is too large"),
    500: ("internal_error", "the server failed to answer this request"),
}


class JsonErrors:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if (
            response.status_code >= 400
            and request.path.startswith(JSON_PREFIXES)
            and not response.get("Content-Type", "").startswith("application/json")
        ):
            code, message = CODES.get(response.status_code, ("http_error", "the request failed"))
            replaced = JsonResponse(error_body(code, message), status=response.status_code)
            for header in ("Allow", "WWW-Authenticate", "Retry-After"):
                if header in response:
                    replaced[header] = response[header]
            return replaced
        return response

    def process_exception(self, request, exception):
        """A view that met a locked store answers 503 with Retry-After (JSON under the API prefixes)."""
        busy = store_busy(exception)
        if busy is None:
            return None
        if request.path.startswith(JSON_PREFIXES):
            response = JsonResponse(busy.as_dict(), status=busy.status)
        else:
            response = HttpResponse(
                busy.message, status=busy.status, content_type="text/plain; charset=utf-8"
            )
        for name, value in busy.headers.items():
            response[name] = value
        return response


class AgentScope:
    """Requests that carry an agent's key run inside `rls.agent_scope` for that agent (PostgreSQL
    with row-level security installed; elsewhere this only reads the key)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith(JSON_PREFIXES):
            return self.get_response(request)
        from django.db import connection

        if not installed(connection):
            return self.get_response(request)
        from collections_app.services.agents import key_from_request

        key = key_from_request(request)
        if key is None:
            return self.get_response(request)
        with agent_scope(key.agent.agent_id):
            return self.get_response(request)


class RequestId:
    """Every request gets an id (the caller's `X-Request-ID` when it is a plain token, else a new one),
    on each log line written while it is answered and on the answer's `X-Request-ID` header."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        value, token = set_request_id(request.headers.get("X-Request-ID"))
        try:
            response = self.get_response(request)
        finally:
            reset_request_id(token)
        response["X-Request-ID"] = value
        return response


class RequestTrace:
    """Each request is a span (`request`, continuing a caller's `traceparent`), so what it does (a search,
    a build it queues) joins one trace. Attributes: the method, the route pattern and the status, never
    the path asked for."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with tracing.request_span(request.headers, **{"http.request.method": request.method[:16]}) as span:
            response = self.get_response(request)
            if span.is_recording():
                match = getattr(request, "resolver_match", None)
                route = (match.route or match.url_name or "unnamed") if match is not None else "unmatched"
                span.set_attribute("http.route", route)
                span.set_attribute("http.response.status_code", response.status_code)
            return response
