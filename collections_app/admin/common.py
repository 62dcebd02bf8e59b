"""Small pieces the admin modules share: badges, permission checks, the progress payload."""

from django.contrib import messages
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.utils.html import format_html

from ragsite.errors import Conflict, RagsiteError

from ..models import (
    BuildRun,
)
from ..services.builds import ACTIVE_STATES, request_build

HISTORY_ROWS = 20


def refused_display(refused) -> str:
    """The three answers of `refused`, never collapsed: not recorded, nothing, or names."""
    if refused is None:
        return "not recorded"
    if not refused:
        return "nothing refused"
    return ", ".join(refused)


def refused_html(refused):
    """`refused_display`, each state styled differently so that none can be mistaken for another."""
    if refused is None:
        return format_html('<span class="rs-refused-none" title="no build recorded what it could not read">{}</span>',
                           "not recorded")
    if not refused:
        return format_html('<span class="rs-refused-empty">{}</span>', "nothing refused")
    return format_html('<span class="rs-refused-names">{}</span>', ", ".join(refused))


def status_badge(status: str):
    return format_html('<span class="rs-badge rs-status-{}">{}</span>', status.replace(" ", "-"), status)


def text_block(text: str, extra_class: str = ""):
    return format_html('<div class="rs-text {}">{}</div>', extra_class, text)


def require(allowed: bool) -> None:
    if not allowed:
        raise PermissionDenied


def has_perm(request, action: str, model) -> bool:
    opts = model._meta
    return request.user.has_perm(f"{opts.app_label}.{get_permission_codename(action, opts)}")


def progress_payload(run: BuildRun | None) -> dict:
    """What the progress bar shows for one build: status, percent and the counts behind it."""
    if run is None:
        return {"build": None, "status": "never built", "active": False, "percent": 0, "detail": "no build yet"}
    detail = f"{run.documents_done} of {run.documents_total} documents read"
    if run.paragraphs_total:
        detail += f", {run.paragraphs_done} of {run.paragraphs_total} paragraphs embedded"
    if run.status == BuildRun.SUCCEEDED:
        detail += f"; {run.passages} paragraphs"
    return {
        "build": run.pk,
        "status": run.status,
        "active": run.status in ACTIVE_STATES,
        "percent": run.percent,
        "documents_done": run.documents_done,
        "documents_total": run.documents_total,
        "paragraphs_done": run.paragraphs_done,
        "paragraphs_total": run.paragraphs_total,
        "passages": run.passages,
        "detail": detail,
        "error": run.error,
        "warnings": list(run.problems) + list(run.warnings),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
    }


def request_build_or_say_why(modeladmin, request, collection) -> BuildRun | None:
    """Queue one build through the service; a build already running is a message, not an error page."""
    try:
        return request_build(collection=collection, requested_by=f"admin:{request.user.get_username()}")
    except Conflict as exc:
        modeladmin.message_user(request, f"Not started: {exc.message}. Wait for it to finish.", messages.WARNING)
    except RagsiteError as exc:
        modeladmin.message_user(request, f"Not started: {exc.message}", messages.ERROR)
    return None
