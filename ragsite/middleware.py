"""Agents get the one JSON error shape even where no view of ours answered.

Django and django-ninja answer an unknown route with an HTML 404 and a wrong method
with a plain-text 405. Under the agent-facing prefixes (/api/, /mcp, /v1/) those
become `{"error": {"code", "message"}}`, keeping the Allow header.
"""

from django.http import JsonResponse

from .errors import error_body

AGENT_PREFIXES = ("/api/", "/mcp", "/v1/", "/count_tokens")
REWRITTEN = {
    404: ("not_found", "no such route"),
    405: ("method_not_allowed", "this route does not answer {method}"),
}


def json_errors_for_agents(get_response):
    def middleware(request):
        response = get_response(request)
        if response.status_code not in REWRITTEN or not request.path.startswith(AGENT_PREFIXES):
            return response
        if response.get("Content-Type", "").startswith("application/json"):
            return response
        code, message = REWRITTEN[response.status_code]
        answer = JsonResponse(error_body(code, message.format(method=request.method)), status=response.status_code)
        if response.has_header("Allow"):
            answer["Allow"] = response["Allow"]
        return answer

    return middleware
