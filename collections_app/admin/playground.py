"""The search playground: run a search exactly as an agent would, and show everything it answers."""

from django import forms
from django.contrib import messages
from django.template.response import TemplateResponse
from django.urls import path

from ragsite.errors import RagsiteError

from ..models import (
    Agent,
    Collection,
    Reader,
)
from ..services.search import MAX_AROUND, MAX_MOST, MAX_QUESTION_CHARS, search_collection
from .common import (
    require,
)


class PlaygroundForm(forms.Form):
    collection = forms.ModelChoiceField(
        queryset=Collection.objects.select_related("agent"), help_text="The search runs as the agent owning it."
    )
    question = forms.CharField(max_length=MAX_QUESTION_CHARS, widget=forms.Textarea(attrs={"rows": 3, "cols": 80}))
    reader = forms.ModelChoiceField(
        queryset=Reader.objects.all(), required=False, to_field_name="external_id",
        help_text="Required for a per-reader collection.",
    )
    on_behalf_of = forms.ModelChoiceField(
        queryset=Agent.objects.all(), required=False, to_field_name="agent_id", label="On behalf of",
        help_text="The agent charged for model calls; empty = nobody is charged and nothing is recorded.",
    )
    min_score = forms.FloatField(required=False, min_value=0, max_value=1, label="Floor",
                                 help_text="Empty = the collection's or MIN_SCORE.")
    around = forms.IntegerField(required=False, min_value=0, max_value=MAX_AROUND,
                                help_text="Empty = the collection's or AROUND.")
    most = forms.IntegerField(initial=5, min_value=1, max_value=MAX_MOST)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["collection"].label_from_instance = lambda c: f"{c.agent.agent_id} / {c.name}"



class PlaygroundAdminMixin:
    """Adds ``playground/`` (name ``collections_app_collection_playground``) to the Collection ModelAdmin."""

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("playground/", wrap(self.playground_view), name="collections_app_collection_playground"),
        ] + super().get_urls()

    def playground_view(self, request):
        """Run a search exactly as the API would, through `search_collection`, and show everything it answers."""
        require(self.has_view_permission(request))
        answer = None
        if request.method == "POST":
            form = PlaygroundForm(request.POST)
            if form.is_valid():
                data = form.cleaned_data
                collection = data["collection"]
                try:
                    answer = search_collection(
                        agent=collection.agent,
                        collection=collection,
                        question=data["question"],
                        reader=data["reader"].external_id if data["reader"] else None,
                        on_behalf_of=data["on_behalf_of"].agent_id if data["on_behalf_of"] else None,
                        most=data["most"] or 5,
                        around=data["around"],
                        min_score=data["min_score"],
                    )
                except RagsiteError as exc:
                    self.message_user(request, f"{exc.message} ({exc.code})", messages.ERROR)
                else:
                    answer["searched_as"] = collection.agent.agent_id
                    for paragraph in answer["paragraphs"]:
                        paragraph["percent"] = round(100 * paragraph["score"], 1)
                    answer["floor_percent"] = round(100 * answer["floor"], 1)
        else:
            form = PlaygroundForm(initial={"collection": request.GET.get("collection"), "most": 5})
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Search playground",
            "form": form,
            "answer": answer,
        }
        return TemplateResponse(request, "admin/collections_app/playground.html", context)
