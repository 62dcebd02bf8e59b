"""Agents, their keys and their spend: keys are shown once, revoked with a confirmation; spend per day."""

import secrets

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, Q
from django.http import HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from ..conf import settings
from ..models import (
    Agent,
    ApiKey,
    ModelCall,
)
from ..services.agents import issue_key, revoke_key
from ..services.knowledge import agent_id_problem
from ..services.ledger import spend_by_day, spent_today
from .common import (
    backup_download,
    count_of,
    require,
)


class ApiKeyInline(admin.TabularInline):
    model = ApiKey
    fields = ["prefix", "name", "may_act_for_others", "created_at", "last_used_at", "state"]
    readonly_fields = ["prefix", "created_at", "last_used_at", "state"]
    extra = 0
    can_delete = False
    ordering = ["-created_at"]

    def has_add_permission(self, request, obj=None):
        return False  # keys are issued by a button, so the raw key can be shown once

    @admin.display(description="state")
    def state(self, key):
        if key.revoked_at is not None:
            return format_html(
                '<span class="rs-badge rs-status-refused">revoked {}</span>',
                key.revoked_at.strftime("%Y-%m-%d %H:%M"),
            )
        url = reverse("admin:collections_app_apikey_revoke", args=[key.pk])
        return format_html(
            '<span class="rs-badge rs-status-succeeded">active</span> <a href="{}">revoke…</a>', url
        )


def why_no_spend() -> str:
    """Why an agent's spend can be empty: only calls to a remote model are charged (a newcomer searched
    dozens of times with the built-in model and saw nothing, with no word why)."""
    remote = [
        name
        for name, on in (
            ("embedding model", settings.EMBED_BACKEND == "http"),
            ("judge", bool(settings.JUDGE_URL)),
            ("reranker", bool(settings.RERANK_URL)),
        )
        if on
    ]
    if not remote:
        return (
            "Only calls to a remote model are charged, and this server uses none: it embeds with the "
            "built-in "
            "model on its own processor and has no judge or reranker, so searches and builds cost nothing "
            "and are not listed here. Configuring a remote embedding model, judge or reranker "
            "(docs/configuration.md) makes their calls appear here, charged to the agent that asked."
        )
    return (
        f"This server calls a remote {' and '.join(remote)}; none of their calls was charged to this agent "
        "in the last 30 days (a search with onBehalfOf charges the agent named there)."
    )


def spend_chart(days, budget=None) -> str:
    """An inline SVG bar chart of cost per day (calls when nothing had a price), with the daily budget
    drawn as a line and the days over it marked."""
    by_cost = any(d.cost for d in days)
    values = [float(d.cost) if by_cost else d.calls for d in days]
    if not any(values):
        return format_html(
            '<p class="rs-refused-none" id="spend-empty">No model calls in the last 30 days. {}</p>',
            why_no_spend(),
        )
    budget = float(budget) if budget is not None and by_cost else None
    top = max([*values, budget or 0]) or 1
    width, height, gap = 600, 120, 2
    bar = (width - gap * (len(days) - 1)) / len(days)
    bars = []
    for i, (day, value) in enumerate(zip(days, values, strict=True)):
        h = 0 if not value else max(2.0, (height - 30) * value / top)
        x = i * (bar + gap)
        over = budget is not None and value >= budget
        label = f"{day.day:%Y-%m-%d}: {count_of(day.calls, 'call')}, cost {day.cost:.4f}" + (
            " (over budget)" if over else ""
        )
        # format_html escapes its arguments into strings first, so numbers are formatted here.
        bars.append(
            format_html(
                '<rect class="rs-spend-bar{}" x="{}" y="{}" width="{}" height="{}"><title>{}</title></rect>',
                " rs-over" if over else "",
                f"{x:.1f}",
                f"{height - 14 - h:.1f}",
                f"{bar:.1f}",
                f"{h:.1f}",
                label,
            )
        )
    if budget is not None:
        y = height - 14 - (height - 30) * budget / top
        bars.append(
            format_html(
                '<line class="rs-budget-line" x1="0" x2="{}" y1="{}" y2="{}"><title>daily budget '
                "{}</title></line>"
                '<text class="rs-chart-axis" x="{}" y="{}" text-anchor="end">budget {}</text>',
                width,
                f"{y:.1f}",
                f"{y:.1f}",
                f"{budget:.4f}",
                width,
                f"{y - 3:.1f}",
                f"{budget:.4f}",
            )
        )
    axis = format_html(
        '<text x="0" y="{}" class="rs-chart-axis">{}</text>'
        '<text x="{}" y="{}" text-anchor="end" class="rs-chart-axis">{}</text>'
        '<text x="0" y="10" class="rs-chart-axis">max {}</text>',
        height - 2,
        f"{days[0].day:%d %b}",
        width,
        height - 2,
        f"{days[-1].day:%d %b}",
        f"{top:.4f}" if by_cost else count_of(int(top), "call"),
    )
    return format_html(
        '<svg class="rs-spend-chart" role="img" aria-label="{}" viewBox="0 0 {} {}" width="{}" '
        'height="{}">{}{}</svg>',
        "cost per day" if by_cost else "model calls per day",
        width,
        height,
        width,
        height,
        format_html_join("", "{}", ((b,) for b in bars)),
        axis,
    )


class AgentForm(forms.ModelForm):
    class Meta:
        model = Agent
        fields = ["agent_id", "name", "daily_budget", "runaway_limit"]

    def clean_agent_id(self):
        agent_id = self.cleaned_data["agent_id"]
        problem = agent_id_problem(agent_id, exclude_pk=self.instance.pk)
        if problem:
            raise forms.ValidationError(problem)
        return agent_id


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    form = AgentForm

    @admin.action(
        description="Download a backup of the selected agent (memories included)", permissions=["change"]
    )
    def download_backup(self, request, queryset):
        return backup_download(self, request, queryset, lambda a: ("agent", a.agent_id))

    list_display = [
        "agent_id",
        "name",
        "daily_budget",
        "spent_today_shown",
        "runaway_limit",
        "active_keys",
        "created_at",
    ]
    search_fields = ["agent_id", "name"]
    actions = ["download_backup"]
    fields = ["agent_id", "name", "daily_budget", "runaway_limit", "created_at", "spend"]
    readonly_fields = ["created_at", "spend"]
    inlines = [ApiKeyInline]

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        if "daily_budget" in form.base_fields:
            currency = settings.LEDGER_CURRENCY
            field = form.base_fields["daily_budget"]
            field.label = f"Daily budget ({currency})"
            field.help_text = (
                f"Spend per day in {currency}, as MODEL_PRICES prices model calls; over it, the judge is not "
                "called for this agent until tomorrow. Empty = no budget."
            )
        return form

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .annotate(active_key_count=Count("keys", filter=Q(keys__revoked_at__isnull=True), distinct=True))
        )

    def get_readonly_fields(self, request, obj=None):
        return ["agent_id", "created_at", "spend"] if obj is not None else ["created_at", "spend"]

    @admin.display(description="active keys", ordering="active_key_count")
    def active_keys(self, agent):
        return agent.active_key_count

    @admin.display(description="spent today")
    def spent_today_shown(self, agent):
        spent = spent_today(agent)
        if agent.daily_budget is not None and spent >= float(agent.daily_budget):
            return format_html('<span class="rs-refused-names">{} (over budget)</span>', f"{spent:.4f}")
        return f"{spent:.4f}"

    @admin.display(description="spend, last 30 days")
    def spend(self, agent):
        if agent.pk is None:
            return "—"
        days = spend_by_day(agent, days=30)
        used = [d for d in days if d.calls]
        state = ""
        if agent.daily_budget is not None:
            spent = spent_today(agent)
            over = spent >= float(agent.daily_budget)
            state = format_html(
                '<p class="{}" data-role="budget-state">Today: {} {} of a {} {} daily budget{}</p>',
                "rs-refused-names" if over else "rs-refused-empty",
                f"{spent:.4f}",
                settings.LEDGER_CURRENCY,
                f"{agent.daily_budget:.4f}",
                settings.LEDGER_CURRENCY,
                " — over budget: the judge is not called for this agent until tomorrow" if over else "",
            )
        total_cost = sum(d.cost for d in days)
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    f"{d.day:%Y-%m-%d}",
                    f"{d.calls:,}",
                    f"{d.tokens_in:,}",
                    f"{d.tokens_out:,}",
                    f"{d.cost:.4f}",
                )
                for d in reversed(used)
            ),
        )
        table = format_html(
            '<table class="rs-spend-table"><thead><tr><th>day</th><th>calls</th><th>tokens in</th>'
            "<th>tokens out</th><th>cost ({})</th></tr></thead><tbody>{}</tbody>"
            "<tfoot><tr><th>30 days</th><th>{}</th><th>{}</th><th>{}</th><th>{}</th></tr></tfoot></table>",
            settings.LEDGER_CURRENCY,
            rows or mark_safe('<tr><td colspan="5" class="rs-refused-none">no model calls</td></tr>'),
            f"{sum(d.calls for d in days):,}",
            f"{sum(d.tokens_in for d in days):,}",
            f"{sum(d.tokens_out for d in days):,}",
            f"{total_cost:.4f}",
        )
        return format_html(
            '<div class="rs-spend">{}{}{}</div>', state, spend_chart(days, agent.daily_budget), table
        )

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # A fresh one-time token for the "Issue a new key" form: a reload of the page that shows the key
        # re-posts a used token, and no second key is issued.
        extra_context = {**(extra_context or {}), "issue_token": _new_issue_token(request)}
        return super().change_view(request, object_id, form_url, extra_context)

    def get_urls(self):
        return [
            path(
                "<path:object_id>/issue-key/",
                self.admin_site.admin_view(self.issue_key_view),
                name="collections_app_agent_issue_key",
            ),
        ] + super().get_urls()

    def _show_keys(self, request, issued):
        """The one page a raw key is ever shown on: rendered in the response, stored nowhere."""
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "New API key" if len(issued) == 1 else "New API keys",
            "issued": issued,
        }
        return TemplateResponse(request, "admin/collections_app/agent/key_issued.html", context)

    def issue_key_view(self, request, object_id):
        back = reverse("admin:collections_app_agent_change", args=[object_id])
        if request.method != "POST":
            return HttpResponseRedirect(back)
        agent = get_object_or_404(Agent, pk=object_id)
        require(self.has_change_permission(request, agent))
        if not _use_issue_token(request, request.POST.get("token", "")):
            self.message_user(
                request,
                "That key was already shown once and is not shown again. If it was not "
                "copied, revoke it and issue a new one.",
                messages.WARNING,
            )
            return HttpResponseRedirect(back)
        name = (request.POST.get("name") or "issued in admin").strip()[:100]
        key, raw = issue_key(agent=agent, name=name)
        response = self._show_keys(request, [(agent, key, raw)])
        response["Cache-Control"] = "no-store"
        return response


ISSUE_TOKENS = "ragsite_issue_tokens"


def _new_issue_token(request) -> str:
    token = secrets.token_urlsafe(16)
    tokens = request.session.get(ISSUE_TOKENS, [])[-19:]  # a few open agent pages at once
    request.session[ISSUE_TOKENS] = [*tokens, token]
    return token


def _use_issue_token(request, token: str) -> bool:
    tokens = request.session.get(ISSUE_TOKENS, [])
    if not token or token not in tokens:
        return False
    request.session[ISSUE_TOKENS] = [t for t in tokens if t != token]
    return True


class KeyStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    list_display = [
        "prefix",
        "agent",
        "name",
        "may_act_for_others",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = [KeyStateFilter, "agent"]
    fields = ["agent", "prefix", "name", "may_act_for_others", "created_at", "last_used_at", "revoked_at"]
    readonly_fields = ["agent", "prefix", "created_at", "last_used_at", "revoked_at"]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Revoke selected keys", permissions=["change"])
    def revoke(self, request, queryset):
        keys = list(queryset.filter(revoked_at__isnull=True))
        for key in keys:
            revoke_key(key=key)
        self.message_user(request, f"Revoked {count_of(len(keys), 'key')}.", messages.SUCCESS)

    def get_urls(self):
        return [
            path(
                "<path:object_id>/revoke/",
                self.admin_site.admin_view(self.revoke_view),
                name="collections_app_apikey_revoke",
            ),
        ] + super().get_urls()

    def revoke_view(self, request, object_id):
        key = get_object_or_404(ApiKey.objects.select_related("agent"), pk=object_id)
        require(self.has_change_permission(request, key))
        back = reverse("admin:collections_app_agent_change", args=[key.agent_id])
        if request.method == "POST":
            revoke_key(key=key)
            self.message_user(
                request, f"Key {key.prefix}… of {key.agent.agent_id} is revoked.", messages.SUCCESS
            )
            return HttpResponseRedirect(back)
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Revoke an API key",
            "key": key,
            "back": back,
        }
        return TemplateResponse(request, "admin/collections_app/apikey/revoke.html", context)


@admin.register(ModelCall)
class ModelCallAdmin(admin.ModelAdmin):
    list_display = [
        "created_at",
        "agent",
        "collection",
        "purpose",
        "model",
        "tokens_in",
        "tokens_out",
        "cost",
    ]
    list_filter = ["purpose", "agent", "model"]
    list_select_related = ["agent", "collection__agent"]
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
