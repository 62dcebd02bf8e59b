"""Webhooks in the admin: staff register a URL per agent for chosen events and read every delivery's fate.

A hook's signing secret is shown once, on the page that answers its creation or its new secret (rendered
in that response, stored nowhere else), and to nobody afterwards: kept encrypted, masked on its page.
"""

from django import forms
from django.contrib import admin, messages
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from ..models import Webhook, WebhookDelivery
from ..services import webhooks
from .common import status_badge

RECENT = 20


def _when(moment) -> str:
    return timezone.localtime(moment).strftime("%Y-%m-%d %H:%M:%S") if moment else "—"


class WebhookForm(forms.ModelForm):
    events = forms.MultipleChoiceField(
        choices=[(event, event) for event in Webhook.EVENTS], widget=forms.CheckboxSelectMultiple
    )

    class Meta:
        model = Webhook
        fields = ["agent", "url", "events", "active", "description"]
        widgets = {"url": forms.URLInput(attrs={"size": 80})}

    def clean_url(self):
        url = self.cleaned_data["url"].strip()
        try:
            return webhooks.validate_url(url)
        except webhooks.InvalidWebhook as exc:
            raise forms.ValidationError(exc.message) from None

    def clean_events(self):
        return webhooks.validate_events(self.cleaned_data["events"])


@admin.register(Webhook)
class WebhookAdmin(admin.ModelAdmin):
    form = WebhookForm
    list_display = ["__str__", "agent", "url", "event_list", "active", "last_delivery"]
    list_filter = ["agent", "active"]
    readonly_fields = ["secret_shown", "recent_deliveries"]
    actions = ["give_new_secrets"]

    @admin.action(description="Give the selected webhooks new signing secrets", permissions=["change"])
    def give_new_secrets(self, request, queryset):
        issued = webhooks.new_secrets(hooks=queryset)
        self.message_user(
            request,
            f"{len(issued)} webhooks have a new signing secret; update their receivers.",
            messages.SUCCESS,
        )
        hooks = {hook.pk: hook for hook in Webhook.objects.filter(pk__in=issued)}
        return self._show_secrets(request, [(hooks[pk], secret) for pk, secret in issued.items()])

    def response_add(self, request, obj, post_url_continue=None):
        # The new hook's secret, once, in the answer to its creation (never a message: those are stored).
        return self._show_secrets(request, [(obj, obj.secret)])

    def _show_secrets(self, request, issued):
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "New signing secret" if len(issued) == 1 else "New signing secrets",
            "issued": issued,
        }
        response = TemplateResponse(request, "admin/collections_app/webhook/secret_issued.html", context)
        response["Cache-Control"] = "no-store"
        return response

    def get_fieldsets(self, request, obj=None):
        fields = ["agent", "url", "events", "active", "description"]
        if obj is None:
            return [(None, {"fields": fields})]
        return [
            (None, {"fields": [*fields, "secret_shown"]}),
            ("Deliveries", {"fields": ["recent_deliveries"]}),
        ]

    @admin.display(description="recent deliveries")
    def recent_deliveries(self, hook):
        recent = hook.deliveries.order_by("-created_at", "-id")[:RECENT]
        rows = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    d.event,
                    status_badge(d.status),
                    d.attempts,
                    d.response_status or "—",
                    d.last_error or "—",
                    _when(d.delivered_at or d.last_attempt_at or d.created_at),
                )
                for d in recent
            ),
        )
        every = reverse("admin:collections_app_webhookdelivery_changelist") + f"?webhook__id__exact={hook.pk}"
        return format_html(
            '<table class="rs-deliveries"><thead><tr><th>event</th><th>status</th><th>attempts</th>'
            "<th>HTTP</th><th>last error</th><th>when</th></tr></thead><tbody>{}</tbody></table>"
            '<p><a href="{}">every delivery of this webhook</a></p>',
            rows or format_html('<tr><td colspan="6">{}</td></tr>', "none yet"),
            every,
        )

    @admin.display(description="signing secret")
    def secret_shown(self, hook):
        return format_html(
            '<span data-role="webhook-secret-hidden">{}</span><div class="help">{}</div>',
            "whsec_•••••••• (hidden)",
            "Shown once, when the hook was made or given a new secret; it is kept encrypted. Lost or "
            "leaked: select the hook in the list and give it a new signing secret.",
        )

    @admin.display(description="events")
    def event_list(self, hook):
        return ", ".join(hook.events)

    @admin.display(description="last delivery")
    def last_delivery(self, hook):
        delivery = hook.deliveries.order_by("-created_at", "-id").first()
        if delivery is None:
            return "—"
        return format_html(
            "{} {} ({} attempts)", delivery.event, status_badge(delivery.status), delivery.attempts
        )


@admin.register(WebhookDelivery)
class WebhookDeliveryAdmin(admin.ModelAdmin):
    list_display = [
        "uid",
        "webhook",
        "event",
        "status_shown",
        "attempts",
        "response_status",
        "last_error",
        "created_at",
        "next_attempt_at",
        "delivered_at",
    ]
    list_filter = ["status", "event", "webhook__agent", "webhook"]
    readonly_fields = [
        "webhook",
        "uid",
        "event",
        "payload",
        "status",
        "attempts",
        "response_status",
        "last_error",
        "created_at",
        "last_attempt_at",
        "next_attempt_at",
        "delivered_at",
    ]
    actions = ["try_again_now"]

    @admin.display(description="status", ordering="status")
    def status_shown(self, delivery):
        return status_badge(delivery.status)

    def has_add_permission(self, request):
        return False

    @admin.action(description="Try the selected deliveries again now", permissions=["change"])
    def try_again_now(self, request, queryset):
        count = webhooks.send_again(deliveries=queryset)
        self.message_user(request, f"{count} deliveries queued again.", messages.SUCCESS)
