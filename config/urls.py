from django.contrib import admin
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import path, re_path
from django.views.decorators.csrf import csrf_exempt

from collections_app import dify_api, embedding_server, openai_api, scim_api
from ragsite.errors import error_body
from ragsite.mcp.transport import mcp_endpoint

from .api import api
from .metrics import metrics
from .sso import admin_login, sso_callback, sso_login, sso_logout


# Bearer keys, no cookies: a POST to an unknown route is a 404, not a CSRF page (docs/decisions/0021).
@csrf_exempt
def api_not_found(request, rest=""):
    """Unknown routes under /api/ (and /v1/vector_stores/) answer in the API's error shape, not an
    HTML page."""
    return JsonResponse(error_body("not_found", "no such API route"), status=404)


# A small magnifier over a page, in the admin's blue: browsers ask every site for /favicon.ico, and a
# missing one logged a "Not Found" warning under every admin page.
FAVICON = (
    '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">'
    '<rect x="5" y="3" width="17" height="22" rx="2" fill="#417690"/>'
    '<path d="M9 9h9M9 13h9M9 17h5" stroke="#fff" stroke-width="2"/>'
    '<circle cx="21" cy="20" r="6" fill="#fff" stroke="#205067" stroke-width="3"/>'
    '<path d="M25 24l5 5" stroke="#205067" stroke-width="3.5" stroke-linecap="round"/></svg>'
)


def favicon(request):
    response = HttpResponse(FAVICON, content_type="image/svg+xml")
    response["Cache-Control"] = "public, max-age=86400"
    return response


def home(request):
    """`/`: where to go next (a new user opened the address `make run` printed and got a 404)."""
    return render(request, "home.html", {"docs_url": "/api/v1/docs"})


# The admin's login page shows the organisation's sign-in beside (or instead of) the password form.
admin.site.login_template = "sso/admin_login.html"

urlpatterns = [
    path("", home, name="home"),
    path("favicon.ico", favicon, name="favicon"),
    # Before the admin's own: its login page carries the provider's button, its logout ends the provider's
    # session too (config/sso.py).
    path("admin/login/", admin_login, name="admin-login"),
    path("admin/logout/", sso_logout, name="admin-logout"),
    path("admin/", admin.site.urls),
    path("sso/login", sso_login, name="sso-login"),
    path("sso/callback", sso_callback, name="sso-callback"),
    # Dify's External Knowledge API: Dify appends /retrieval to the endpoint it is given (/api/v1).
    path("api/v1/retrieval", dify_api.retrieval, name="dify-retrieval"),
    path("api/v1/", api.urls),
    path("v1/embeddings", embedding_server.embeddings, name="embeddings"),
    path("v1/tokenize", embedding_server.tokenize, name="tokenize"),
    path("count_tokens", embedding_server.count_tokens, name="count-tokens"),
    path("mcp", mcp_endpoint, name="mcp"),
    path("metrics", metrics, name="metrics"),
    path("v1/vector_stores", openai_api.vector_stores, name="vector-stores"),
    path("v1/vector_stores/<str:store_id>", openai_api.vector_store_detail, name="vector-store"),
    path(
        "v1/vector_stores/<str:store_id>/search", openai_api.vector_store_search, name="vector-store-search"
    ),
    re_path(r"^v1/vector_stores/(?P<rest>.*)$", openai_api.not_found),
    # SCIM 2.0 provisioning by the organisation's identity provider (collections_app/scim_api.py).
    re_path(
        r"^scim/v2/(?P<kind>Users|Groups|ServiceProviderConfig|ResourceTypes|Schemas|\.search)$",
        scim_api.resources,
        name="scim",
    ),
    re_path(
        r"^scim/v2/(?P<kind>Users|Groups|ResourceTypes|Schemas)/(?P<resource_id>[^/]+)$",
        scim_api.resources,
        name="scim-resource",
    ),
    re_path(r"^scim/(?P<rest>.*)$", scim_api.unknown),
    re_path(r"^api/(?P<rest>.*)$", api_not_found),
]
