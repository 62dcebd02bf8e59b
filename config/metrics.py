"""`GET /metrics`: every instrument in Prometheus' text format (ragsite.instruments), and the middleware
that times each request by its route pattern.

Protected: with `METRICS_TOKEN` set, a scrape must carry `Authorization: Bearer <token>` (from any
address); without it only a loopback client may scrape. Behind a reverse proxy every client looks
local, so set the token there.
"""

from __future__ import annotations

import ipaddress
import time

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST

from collections_app.services.queue_gauges import TaskQueueCollector
from ragsite.errors import error_body
from ragsite.instruments import REQUEST_SECONDS, REQUESTS, exposition
from ragsite.security import bearer_matches

METHODS = frozenset({"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"})


@require_GET
def metrics(request):
    refusal = _refusal(request)
    if refusal is not None:
        return refusal
    return HttpResponse(exposition([TaskQueueCollector()]), content_type=CONTENT_TYPE_LATEST)


def _refusal(request) -> HttpResponse | None:
    token = settings.METRICS_TOKEN
    if token:
        if bearer_matches(request.headers.get("Authorization", ""), token):
            return None
        response = JsonResponse(
            error_body("unauthorized", "/metrics needs Authorization: Bearer <METRICS_TOKEN>"), status=401
        )
        response["WWW-Authenticate"] = "Bearer"
        return response
    try:
        local = ipaddress.ip_address(request.META.get("REMOTE_ADDR", "")).is_loopback
    except ValueError:
        local = False
    if local:
        return None
    return JsonResponse(
        error_body("forbidden", "/metrics answers loopback clients only unless METRICS_TOKEN is set"),
        status=403,
    )


class RequestMetrics:
    """Counts and times every request by its route pattern (never the path it was called with)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = _route(match)
        method = request.method if request.method in METHODS else "other"
        REQUESTS.labels(route=route, method=method, status=str(response.status_code)).inc()
        REQUEST_SECONDS.labels(route=route, method=method).observe(time.perf_counter() - started)
        return response


def _route(match) -> str:
    """The URL pattern that answered (`api/v1/collections/<name>/search`), never the path asked for."""
    if match is None:
        return "unmatched"
    return match.route or match.url_name or "unnamed"
