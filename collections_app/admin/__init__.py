"""The Django admin for people: staff only, CSRF on, every action a thin adapter over a service.

What people do here: start rebuilds and watch them, review and upload documents, label paragraphs,
manage readers and labels, issue and revoke keys, read spend, and try searches in the playground. The
pages never show a filesystem path: a collection's folder is named by its variable, an upload by its
file name.

One module per area; importing them registers their ModelAdmins.
"""

from . import agents, collections, documents, paragraphs  # noqa: F401  (registration)
