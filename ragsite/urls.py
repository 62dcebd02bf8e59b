from django.contrib import admin
from django.http import JsonResponse
from django.shortcuts import render
from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt

from collections_app import embedding_server
from ragsite.mcp.transport import mcp_endpoint

from .api import api
from .errors import error_body


@csrf_exempt  # bearer keys, no cookies: a POST to an unknown route is a 404, not a CSRF page (D14)
def api_not_found(request, rest=""):
    """Unknown routes under /api/ answer in the API's error shape rather than with an HTML page."""
    return JsonResponse(error_body("not_found", "no such API route"), status=404)


def home(request):
    """`/`: where to go next (a new user opened the address `make run` printed and got a 404)."""
    return render(request, "home.html", {"docs_url": "/api/v1/docs"})


urlpatterns = [
    path("", home, name="home"),
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("v1/embeddings", embedding_server.embeddings, name="embeddings"),
    path("v1/tokenize", embedding_server.tokenize, name="tokenize"),
    path("count_tokens", embedding_server.count_tokens, name="count-tokens"),
    path("mcp", mcp_endpoint, name="mcp"),
    re_path(r"^api/(?P<rest>.*)$", api_not_found),
]
