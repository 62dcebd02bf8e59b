from django.contrib import admin
from django.http import JsonResponse
from django.urls import path, re_path

from .api import api
from .errors import error_body


def api_not_found(request, rest=""):
    """Unknown routes under /api/ answer in the API's error shape rather than with an HTML page."""
    return JsonResponse(error_body("not_found", "no such API route"), status=404)


urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    re_path(r"^api/(?P<rest>.*)$", api_not_found),
]
