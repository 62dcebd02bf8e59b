"""Small pieces the admin modules share: badges, permission checks, the progress payload."""

from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from ragsite.errors import Conflict, RagsiteError

from ..models import (
    BuildRun,
    Collection,
)
from ..services.builds import ACTIVE_STATES, request_build
from ..services.builds.status import build_phase, waiting_notice

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
        return format_html(
            '<span class="rs-refused-none" title="no build recorded what it could not read">{}</span>',
            "not recorded",
        )
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
        return {
            "build": None,
            "number": None,
            "status": "never built",
            "active": False,
            "percent": 0,
            "phase": "",
            "detail": "no build yet",
        }
    detail = f"{run.documents_done} of {run.documents_total} documents read"
    if run.paragraphs_total:
        detail += f", {run.paragraphs_done} of {run.paragraphs_total} paragraphs embedded"
    if run.status in BuildRun.LIVE:
        detail += f"; {count_of(run.passages, 'paragraph')}"
    eta = _eta_seconds(run)
    if eta is not None:
        detail += f"; about {duration(eta)} left"
    elif run.status == BuildRun.QUEUED:
        detail = "queued: waiting for a task worker to pick it up"
    return {
        "build": run.pk,
        "number": run.number or run.pk,  # what the history and messages call it: "build 3 of policies"
        "status": run.status,
        "active": run.status in ACTIVE_STATES,
        "percent": run.percent,
        "phase": build_phase(run),
        "documents_done": run.documents_done,
        "documents_total": run.documents_total,
        "paragraphs_done": run.paragraphs_done,
        "paragraphs_total": run.paragraphs_total,
        "passages": run.passages,
        "detail": detail,
        "error": run.error,
        "warnings": list(run.problems) + list(run.warnings),
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "eta_seconds": eta,
        # "no task worker is running …" once a queued build has waited BUILD_STALE_SECONDS with no worker.
        "waiting": waiting_notice(run),
    }


def _eta_seconds(run: BuildRun) -> int | None:
    """Time left, from the time spent so far and the share done; None until there is something to go on."""
    if run.status != BuildRun.RUNNING or not run.started_at or not 0 < run.percent < 100:
        return None
    if run.paragraphs_total and not run.paragraphs_done:
        # Embedding has started but no batch has come back: the time spent reading says nothing about
        # it, and an estimate that grows every second is worse than none.
        return None
    spent = (timezone.now() - run.started_at).total_seconds()
    return max(1, int(spent * (100 - run.percent) / run.percent))


def duration(seconds: int) -> str:
    if seconds < 90:
        return count_of(seconds, "second")
    return count_of(round(seconds / 60), "minute")


def request_build_or_say_why(modeladmin, request, collection) -> BuildRun | None:
    """Queue one build through the service; a build already running is a message, not an error page."""
    try:
        return request_build(collection=collection, requested_by=f"admin:{request.user.get_username()}")
    except Conflict as exc:
        if exc.code == "build_running":
            modeladmin.message_user(
                request, f"Not started: {exc.message}. Wait for it to finish.", messages.WARNING
            )
        else:  # a source this server cannot see, refused before anything was queued
            modeladmin.message_user(request, f"Not started: {exc.message}", messages.ERROR)
    except RagsiteError as exc:
        modeladmin.message_user(request, f"Not started: {exc.message}", messages.ERROR)
    return None


def count_of(number: int, noun: str, plural: str | None = None) -> str:
    """ "1 paragraph", "2 paragraphs", "1,204 paragraphs": a number with its noun agreeing."""
    return f"{number:,} {noun if number == 1 else (plural or noun + 's')}"


def documents_line(run: BuildRun) -> str:
    """A build's documents in one line of a collection's history: read, reused, refused, re-labelled
    (a source's permissions changed, nothing downloaded) and read by OCR."""
    return (
        f"{run.documents_read} read, {run.documents_reused} reused, {run.documents_refused} refused"
        + (f", {run.documents_relabelled} re-labelled" if run.documents_relabelled else "")
        + (f", {count_of(run.ocr_pages, 'page')} by OCR" if run.ocr_pages else "")
    )


class SearchableListFilter(admin.SimpleListFilter):
    """A list filter offering every choice through a type-to-find box, never a silently cut list."""

    template = "admin/collections_app/filter_search.html"


def open_collections_notice(paragraphs):
    """When any of `paragraphs` is in a collection that is not per-reader: say that labels do nothing
    there yet, with a one-click switch per collection. None when every one of them is per-reader.

    The switch is a button with its own ``formaction``, so it also works inside the page's main form.
    """
    open_collections = Collection.objects.filter(
        per_reader=False, pk__in=paragraphs.values("collection_id")
    ).select_related("agent")
    rows = [
        (c.name, reverse("admin:collections_app_collection_per_reader", args=[c.pk]), c.name)
        for c in open_collections
    ]
    if not rows:
        return None
    return format_html(
        '<div class="rs-notice" data-role="labels-ignored">{}</div>',
        format_html_join(
            "",
            "<p><strong>{}</strong> is open to every reader; labels take effect when <em>Per reader</em> is "
            "on. "
            '<button type="submit" class="button rs-switch" formaction="{}" formmethod="post" formnovalidate '
            'data-collection="{}">Turn Per reader on</button> '
            '<span class="help">(then every search of it must name a reader)</span></p>',
            rows,
        ),
    )


WARNINGS_SHOWN = 3


def warning_list(items):
    """Warnings as a short list a person reads: the first few, and how many more (never raw JSON)."""
    items = [str(i) for i in items if i]
    if not items:
        return "—"
    shown = format_html_join("", "<li>{}</li>", ((w,) for w in items[:WARNINGS_SHOWN]))
    rest = items[WARNINGS_SHOWN:]
    if rest:
        more = format_html_join("", "<li>{}</li>", ((w,) for w in rest))
        return format_html(
            '<ul class="rs-warnings">{}</ul><details class="rs-more"><summary>{} more</summary>'
            '<ul class="rs-warnings">{}</ul></details>',
            shown,
            len(rest),
            more,
        )
    return format_html('<ul class="rs-warnings">{}</ul>', shown)


def refused_with_reasons(refused, reasons: dict | None):
    """`refused_html`, with each name's reason category beside it for people (the record keeps names only)."""
    if not refused or not reasons:
        return refused_html(refused)
    return format_html(
        '<span class="rs-refused-names">{}</span>',
        format_html_join(
            ", ",
            '{} <span class="rs-refusal">({})</span>',
            ((name, reasons.get(name) or "reason not recorded") for name in refused),
        ),
    )


def backup_download(modeladmin, request, queryset, describe):
    """The admin's "Download a backup" action: one archive (`services.backup`) for one selected object,
    named by ``describe(obj)``; several selected are refused with a message (one archive per download)."""
    from django.contrib import messages
    from django.http import HttpResponse

    from ..services.backup import back_up

    chosen = list(queryset[:2])
    if len(chosen) != 1:
        modeladmin.message_user(request, "Choose one to back up: each is one archive.", messages.WARNING)
        return None
    obj = chosen[0]
    kind, name = describe(obj)
    data = back_up(**{kind: obj})
    response = HttpResponse(data, content_type="application/gzip")
    response["Content-Disposition"] = f'attachment; filename="ragsite-{kind}-{name}.tar.gz"'
    return response
