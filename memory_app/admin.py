"""The Django admin for memory: staff only, CSRF on, read-mostly, every action a thin adapter over a service.

A record's page shows its text divided into its nodes: each node a highlighted span (alternating
colours, titled with its offsets and tokens), with a table of the nodes beside it. A record
without nodes says why (it fits the window, its nodes are missing, or its length is unknown).
"Repair missing nodes" (an action on both lists) calls `repair_records`; the "Memory health" page
shows `check_health()`'s report and its "Repair now" button runs `check_health(repair=True)`.

`RecordNode` has a composite primary key, which Django 5.2's admin cannot register, so nodes are
shown on their record's page instead, read-only. Nodes are derived data: people never edit them.
No page shows a filesystem path: records, models and counts only.
"""

from django.contrib import admin, messages
from django.contrib.auth import get_permission_codename
from django.core.exceptions import PermissionDenied
from django.db.models import Count, IntegerField, OuterRef, Subquery
from django.db.models.functions import Coalesce
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from ragsite.errors import RagsiteError

from . import conf
from .models import RECORD_MODELS, Episode, Memory, Record, RecordNode
from .schedules import HEALTH_REPAIR
from .services import (
    NODES_CURRENT,
    NODES_MISSING,
    NODES_NOT_NEEDED,
    NODES_STALE,
    NodeState,
    check_health,
    node_state,
    repair_records,
)

# The health page lists at most this many of the records needing nodes (the report's counts are exact).
HEALTH_ROWS = 100
# A message names at most this many records.
NAMED_IN_MESSAGE = 10


def _require(allowed: bool) -> None:
    if not allowed:
        raise PermissionDenied


def _may(request, action: str) -> bool:
    """The permission `action` on memories and on episodes alike (the health report covers both)."""
    return all(
        request.user.has_perm(f"{model._meta.app_label}.{get_permission_codename(action, model._meta)}")
        for model in RECORD_MODELS.values()
    )


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count} {one if count == 1 else (many or one + 's')}"


def _named(items: list[dict]) -> str:
    names = [f"{item['kind']}:{item['id']}" for item in items[:NAMED_IN_MESSAGE]]
    more = len(items) - len(names)
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")


def _builds_message(repaired: list[dict]) -> tuple[str, str]:
    """What a list of `build_nodes` answers did, and the message level that fits it."""
    built = [item for item in repaired if item["status"] == "built"]
    fits = [item for item in repaired if item["status"] == "fits"]
    failed = [item for item in repaired if item["status"] in ("failed", "unknown")]
    moved = [item for item in repaired if item["status"] in ("changed", "gone", "present")]
    parts = []
    if built:
        parts.append(
            f"built the nodes of {_plural(len(built), 'record')} ({_named(built)}; "
            f"{_plural(sum(item['nodes'] for item in built), 'node')})"
        )
    if fits:
        parts.append(
            f"{_plural(len(fits), 'record')} now {'fits' if len(fits) == 1 else 'fit'} the window "
            f"and keep{'s' if len(fits) == 1 else ''} no nodes ({_named(fits)})"
        )
    if moved:
        parts.append(
            f"{_plural(len(moved), 'record')} changed or got {'its' if len(moved) == 1 else 'their'} "
            f"nodes meanwhile ({_named(moved)})"
        )
    if failed:
        parts.append(
            f"{_plural(len(failed), 'record')} could not be divided, the embedder failing or unable "
            f"to count ({_named(failed)})"
        )
    level = messages.ERROR if failed and not built else messages.WARNING if failed else messages.SUCCESS
    return "; ".join(parts), level


def health_repair_message(report: dict) -> tuple[str, str]:
    """The message after "Repair now": what `check_health(repair=True)` did, and what is left."""
    if not report["can_divide"]:
        return (
            "Nothing was repaired: the embedding model cannot count tokens, so no nodes can be built.",
            messages.ERROR,
        )
    repaired = report.get("repaired", [])
    orphans = report.get("orphans_removed", 0)
    if not repaired and not orphans:
        return "Nothing to repair: every long record has nodes of the current model.", messages.SUCCESS
    text, level = _builds_message(repaired) if repaired else ("", messages.SUCCESS)
    parts = [text] if text else []
    if orphans:
        parts.append(f"removed {_plural(orphans, 'orphan node')}")
    remaining = report.get("remaining", 0)
    parts.append(
        f"{remaining} remain"
        + (f" (a run repairs at most {conf.REPAIR_LIMIT}; repair again)" if remaining else "")
    )
    text = "; ".join(parts)
    return "Repair: " + text[0].lower() + text[1:] + ".", level


def node_spans(record: Record, state: NodeState):
    """The record's text as one span per node, alternating colours; the spans cover the text exactly.

    Nodes partition their record (seed 002 invariant 4), so a span is `text[start:end]` of each
    node in order. Should they ever not, the uncovered text is still shown, in a span of its own
    marked as such, so that the page always shows the whole record and nothing twice.
    """
    text = record.text
    pieces = []
    cursor = 0
    for node in state.nodes:
        start, end = max(node.start_char, cursor), min(node.end_char, len(text))
        if start > cursor:
            pieces.append(
                format_html(
                    '<span class="rs-node rs-node-gap" title="{}">{}</span>',
                    f"not in any node: {cursor}–{start}",
                    text[cursor:start],
                )
            )
        if end > start:
            pieces.append(
                format_html(
                    '<span class="rs-node rs-node-{}" id="node-{}" data-node="{}" title="{}">{}</span>',
                    "ab"[node.node_index % 2],
                    node.node_index,
                    node.node_index,
                    f"node {node.node_index}: {node.start_char}–{node.end_char}, {node.token_count} tokens",
                    text[start:end],
                )
            )
            cursor = end
    if not state.nodes:
        tokens = "tokens unknown" if state.tokens is None else f"{state.tokens} tokens"
        pieces.append(
            format_html(
                '<span class="rs-node rs-node-whole" title="{}">{}</span>',
                f"the whole record: 0–{len(text)}, {tokens}",
                text,
            )
        )
    elif cursor < len(text):
        pieces.append(
            format_html(
                '<span class="rs-node rs-node-gap" title="{}">{}</span>',
                f"not in any node: {cursor}–{len(text)}",
                text[cursor:],
            )
        )
    return format_html(
        '<div class="rs-node-text" id="record-text" data-state="{}">{}</div>',
        state.state,
        format_html_join("", "{}", ((piece,) for piece in pieces)),
    )


def node_summary(state: NodeState, health_url: str):
    """One sentence on the record's nodes: how many and whose, or why there are none."""
    window = f"{state.window}-token window" if state.window else "window"
    if state.state == NODES_CURRENT:
        text = (
            f"{_plural(len(state.nodes), 'node')} made by {state.model} (the current model), "
            f"each cut against a {state.nodes[0].window}-token window."
        )
        return format_html('<p class="rs-node-summary">{}</p>', text)
    if state.state == NODES_STALE:
        others = sorted({node.embedding_model or "no model" for node in state.nodes} - {state.model})
        text = (
            f"{_plural(len(state.nodes), 'node')}, made by another model ({', '.join(others)}; the current "
            f"model is {state.model}): they count as missing, and the health repair replaces them."
        )
        return format_html(
            '<p class="rs-node-summary rs-refused-names">{} <a href="{}">Memory health</a></p>',
            text,
            health_url,
        )
    tokens = "?" if state.tokens is None else state.tokens
    if state.state == NODES_NOT_NEEDED:
        text = (
            f"No nodes, and none needed: the record fits the {window} of {state.model} "
            f"({tokens} tokens), so it is its own only span."
        )
        return format_html('<p class="rs-node-summary rs-refused-empty">{}</p>', text)
    if state.state == NODES_MISSING:
        text = (
            f"Nodes missing: the record runs past the {window} of {state.model} ({tokens} tokens) but has "
            f"no nodes yet. They are queued when it is stored; otherwise the health repair builds them."
        )
        return format_html(
            '<p class="rs-node-summary rs-refused-names">{} <a href="{}">Memory health</a></p>',
            text,
            health_url,
        )
    text = (
        f"No nodes: {state.model or 'the embedding model'} cannot count this record's tokens, so its length "
        "against a window is unknown and no nodes are built (unknown is never taken to mean “fits”)."
    )
    return format_html('<p class="rs-node-summary rs-refused-none">{}</p>', text)


def node_table(state: NodeState):
    """The nodes' legend: colour, index and offsets, tokens, window, model, and whether it is current."""
    if not state.nodes:
        return ""
    rows = format_html_join(
        "",
        '<tr data-node="{}"><td><span class="rs-swatch rs-node-{}"></span><a href="#node-{}">#{}: '
        "characters {}–{}</a>"
        "</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (
                node.node_index,
                "ab"[node.node_index % 2],
                node.node_index,
                node.node_index,
                node.start_char,
                node.end_char,
                node.token_count,
                node.window,
                node.embedding_model or "—",
                format_html('<span class="rs-refused-empty">{}</span>', "yes")
                if node.embedding_model == state.model
                else format_html('<span class="rs-refused-names">{}</span>', "no"),
            )
            for node in state.nodes
        ),
    )
    return format_html(
        '<table class="rs-node-table"><thead><tr><th>node</th><th>tokens</th><th>window</th>'
        "<th>embedding model</th><th>current model</th></tr></thead><tbody>{}</tbody></table>",
        rows,
    )


class RecordAdmin(admin.ModelAdmin):
    list_display = [
        "id",
        "agent",
        "opening",
        "token_count",
        "node_count",
        "embedding_model",
        "locked",
        "created_at",
    ]
    list_filter = ["locked", "embedding_model"]
    search_fields = ["text", "agent__agent_id"]
    list_select_related = ["agent"]
    actions = ["repair_missing_nodes"]
    # The text is read-only here: a change must go through the service, which re-embeds the
    # record and queues its nodes (the trigger alone would only delete them).
    fieldsets = [
        (
            None,
            {"fields": ["agent", "locked", "created_at", "updated_at", "valid_from", "valid_until", "tags"]},
        ),
        ("Text and nodes", {"fields": ["token_count", "embedding_model", "nodes", "text_by_node"]}),
    ]
    readonly_fields = [
        "agent",
        "token_count",
        "embedding_model",
        "created_at",
        "updated_at",
        # Set by the agent that stores the record, checked by the service (docs/memory.md).
        "valid_from",
        "valid_until",
        "tags",
        "nodes",
        "text_by_node",
    ]

    def has_add_permission(self, request):
        return False

    def get_queryset(self, request):
        counted = (
            RecordNode.objects.filter(parent_kind=self.model.KIND, parent_id=OuterRef("pk"))
            .order_by()
            .values("parent_id")
            .annotate(n=Count("*"))
            .values("n")
        )
        return (
            super()
            .get_queryset(request)
            .defer("embedding")
            .annotate(n_nodes=Coalesce(Subquery(counted, output_field=IntegerField()), 0))
        )

    @admin.display(description="opening")
    def opening(self, record: Record) -> str:
        return record.text[:80] + ("…" if len(record.text) > 80 else "")

    @admin.display(description="nodes", ordering="n_nodes")
    def node_count(self, record: Record):
        return getattr(record, "n_nodes", None) or "—"

    # -- the record's page

    @staticmethod
    def _state(record: Record) -> NodeState:
        """`node_state`, worked out once per page (both fields below show it)."""
        if getattr(record, "_node_state", None) is None:
            record._node_state = node_state(record)
        return record._node_state

    @admin.display(description="nodes")
    def nodes(self, record: Record):
        state = self._state(record)
        return format_html(
            "{}{}", node_summary(state, reverse("admin:memory_app_memory_health")), node_table(state)
        )

    @admin.display(description="text")
    def text_by_node(self, record: Record):
        return node_spans(record, self._state(record))

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}), "health_url": reverse("admin:memory_app_memory_health")}
        return super().changelist_view(request, extra_context)

    # -- repair

    @admin.action(description="Repair missing nodes", permissions=["change"])
    def repair_missing_nodes(self, request, queryset):
        result = repair_records(queryset)
        repaired = result["repaired"]
        if repaired:
            text, level = _builds_message(repaired)
            self.message_user(request, text[0].upper() + text[1:] + ".", level)
        else:
            self.message_user(request, "No selected record was missing nodes.", messages.INFO)
        fine = []
        if result["current"]:
            fine.append(f"{_plural(result['current'], 'record')} already had nodes of the current model")
        if result["fits"]:
            fine.append(
                f"{_plural(result['fits'], 'record')} "
                + ("fits the window and needs" if result["fits"] == 1 else "fit the window and need")
                + " no nodes"
            )
        if fine:
            self.message_user(request, "; ".join(fine).capitalize() + ".", messages.INFO)
        if result["unknown"]:
            self.message_user(
                request,
                f"{_plural(result['unknown'], 'record')} could not be measured: the embedding "
                "model cannot count tokens, so no nodes can be built.",
                messages.WARNING,
            )
        if result["remaining"]:
            self.message_user(
                request,
                f"{result['remaining']} still need nodes: the action builds at most "
                f"{conf.REPAIR_LIMIT} at a time; run it again.",
                messages.WARNING,
            )


@admin.register(Memory)
class MemoryAdmin(RecordAdmin):
    def get_urls(self):
        return [
            path("health/", self.admin_site.admin_view(self.health_view), name="memory_app_memory_health"),
        ] + super().get_urls()

    def health_view(self, request):
        """`check_health()`'s report for the whole store; "Repair now" (a POST) runs
        `check_health(repair=True)`."""
        _require(_may(request, "view"))
        here = reverse("admin:memory_app_memory_health")
        if request.method == "POST":
            _require(_may(request, "change"))
            try:
                report = check_health(repair=True)
            except RagsiteError as exc:
                self.message_user(request, f"Not repaired: {exc.message}", messages.ERROR)
            else:
                self.message_user(request, *health_repair_message(report))
            return HttpResponseRedirect(here)
        report = check_health()
        missing = [
            {
                **item,
                "url": reverse(
                    f"admin:memory_app_{RECORD_MODELS[item['kind']]._meta.model_name}_change",
                    args=[item["id"]],
                ),
            }
            for item in report["missing"][:HEALTH_ROWS]
        ]
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Memory health",
            "report": report,
            "missing": missing,
            "more_missing": len(report["missing"]) - len(missing),
            "schedule": self._schedule(),
            "repair_limit": conf.REPAIR_LIMIT,
            "can_repair": _may(request, "change"),
        }
        return TemplateResponse(request, "admin/memory_app/health.html", context)

    @staticmethod
    def _schedule() -> dict | None:
        """The scheduled repair: its interval, next run, and how its last run ended."""
        from django_q.models import Schedule, Task

        schedule = Schedule.objects.filter(name=HEALTH_REPAIR).first()
        if schedule is None:
            return None
        last = (
            Task.objects.filter(id=schedule.task).only("success", "stopped").first()
            if schedule.task
            else None
        )
        return {
            "name": schedule.name,
            "minutes": schedule.minutes,
            "next_run": schedule.next_run,
            "last": last,
        }


@admin.register(Episode)
class EpisodeAdmin(RecordAdmin):
    pass
