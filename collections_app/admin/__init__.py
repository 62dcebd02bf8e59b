"""The Django admin for people: staff only, CSRF on, every action a thin adapter over a service.

What people do here: start rebuilds and watch them, review and upload documents, label paragraphs,
manage readers and labels, issue and revoke keys, read spend, and try searches in the playground. The
pages never show a filesystem path: a collection's folder is named by its variable, an upload by its
file name.

One module per area; importing them registers their ModelAdmins.
"""

from django.contrib import admin

from . import (  # noqa: F401
    agents,
    audit,
    builds,
    collections,
    documents,
    idp_groups,
    paragraphs,
    sources,
    webhooks,
)

admin.site.site_header = admin.site.site_title = "ragsite"
admin.site.index_title = "Collections, documents, readers and agents"
# There is no public site to view: the admin and the agents' API are the whole of it.
admin.site.site_url = None
# The model list lives on the index page; on the work screens the room goes to the text being read.
admin.site.enable_nav_sidebar = False
