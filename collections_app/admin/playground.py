"""The search playground: run a search exactly as an agent would, and show everything it answers."""

from django import forms
from django.contrib import messages
from django.template.response import TemplateResponse
from django.urls import path, reverse

from ragsite import audit
from ragsite.errors import RagsiteError
from ragsite.fusion import FUSION_WEIGHT

from .. import errors
from ..limits import MAX_AROUND, MAX_MOST, MAX_QUESTION_CHARS
from ..models import (
    Agent,
    Collection,
    Paragraph,
    Reader,
)
from ..schemas.search import quoted
from ..services.search import search_collection
from ..text.context import CONTEXT_WEIGHT
from .common import (
    count_of,
    has_perm,
    require,
)

# What a librarian can do about a refusal the API states for programs; others keep the service's sentence.
PLAIN_WORDS = {
    "reader_required": "{name} answers per reader: pick a Reader above to see what that reader gets.",
    errors.NOT_BUILT: "{name} has not been built yet: press Rebuild on its page, then ask again.",
    errors.MODEL_MISMATCH: "{name} was built with another embedding model than this server's: rebuild it.",
    errors.WIDTH_MISMATCH: "{name} was built with another embedding model than this server's: rebuild it.",
    errors.EMBEDDER_UNAVAILABLE: "the embedding model did not answer; try again in a moment.",
}


def in_plain_words(exc: RagsiteError, collection) -> str:
    """A search refusal as the playground says it: no API codes, no field names."""
    said = PLAIN_WORDS.get(exc.code)
    return said.format(name=f"Collection {collection.name}") if said else exc.message


class PlaygroundForm(forms.Form):
    collection = forms.ModelChoiceField(
        queryset=Collection.objects.select_related("agent"),
        help_text="The search runs as the agent owning it.",
    )
    question = forms.CharField(
        max_length=MAX_QUESTION_CHARS, widget=forms.Textarea(attrs={"rows": 3, "cols": 60})
    )
    reader = forms.ModelChoiceField(
        queryset=Reader.objects.all(),
        required=False,
        to_field_name="external_id",
        help_text="Whom the answer is for; required when the collection answers per reader.",
    )
    min_score = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Floor",
        help_text="The lowest score that comes back; empty = the collection's setting.",
    )
    around = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_AROUND,
        label="Neighbours",
        help_text="Paragraphs either side of a hit; empty = the collection's setting.",
    )
    most = forms.IntegerField(
        initial=5,
        min_value=1,
        max_value=MAX_MOST,
        label="Hits",
        help_text="How many matching paragraphs come back (the API's most). Neighbours then join hits that "
        "sit together into one paragraph, so there can be fewer paragraphs than hits.",
    )
    compare_reader = forms.ModelChoiceField(
        queryset=Reader.objects.all(),
        required=False,
        to_field_name="external_id",
        label="Compare with reader",
        help_text="Side by side: the same question for a second reader…",
    )
    compare_min_score = forms.FloatField(
        required=False,
        min_value=0,
        max_value=1,
        label="Compare with floor",
        help_text="…or at a second floor.",
    )
    on_behalf_of = forms.ModelChoiceField(
        queryset=Agent.objects.all(),
        required=False,
        to_field_name="agent_id",
        label="Charge to agent",
        help_text="The agent charged for model calls; empty = nobody is charged and nothing is recorded.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["collection"].label_from_instance = lambda c: f"{c.agent.agent_id} / {c.name}"

    def compares(self) -> bool:
        data = self.cleaned_data
        return data.get("compare_reader") is not None or data.get("compare_min_score") is not None


def _laid_out(answer: dict, collection: Collection, label: str) -> dict:
    """The answer as the page shows it: each result's pieces with chunk ids, links and score parts."""
    pieces = answer.get("explain", {}).get("pieces", [])
    ids = {piece["paragraph"] for run in pieces for piece in run}
    found = {
        p.pk: p
        for p in Paragraph.objects.filter(pk__in=ids)
        .select_related("document")
        .only("pk", "index", "document__name", "document__id")
    }
    results = []
    for paragraph, parts in zip(answer["paragraphs"], pieces, strict=False):
        # A piece is named as the answer cites it (`chunk_ids`, the same rows in document order): with a
        # paragraph of its document switched off or in review, that is not its stored index (decision 0073).
        cited = paragraph.get("chunk_ids") or []
        shown = []
        for i, piece in enumerate(parts):
            row = found.get(piece["paragraph"])
            shown.append(
                {
                    **piece,
                    "chunk_id": cited[i] if len(cited) == len(parts) else (row.chunk_id if row else ""),
                    "url": reverse("admin:collections_app_paragraph_change", args=[piece["paragraph"]]),
                    "percent": round(100 * piece["score"], 1),
                }
            )
        # The hit that gave the passage its score (the best one; stitch.py): its parts are the ones that add
        # up.
        hits = [p for p in shown if p["hit"]] or shown[:1]
        hit = max(hits, key=lambda p: p["score"]) if hits else None
        for piece in shown:
            piece["best"] = piece is hit
        document = found[hit["paragraph"]].document if hit and hit["paragraph"] in found else None
        results.append(
            {
                **paragraph,
                "chunk_id": paragraph.get("chunk_id") or (hit["chunk_id"] if hit else ""),
                "percent": round(100 * paragraph["score"], 1),
                "hit": hit,
                "pieces": shown,
                "document_url": reverse("admin:collections_app_document_change", args=[document.pk])
                if document
                else "",
            }
        )
    hit_count = sum(1 for result in results for piece in result["pieces"] if piece["hit"])
    return {
        **answer,
        "label": label,
        "results": results,
        # "5 hits in 1 paragraph": `most` counts hits, and neighbours join hits into fewer paragraphs.
        "counted": f"{count_of(hit_count, 'hit')} in {count_of(len(results), 'paragraph')}",
        "weights": {
            "semantic": FUSION_WEIGHT,
            "lexical": round(1 - FUSION_WEIGHT, 6),
            "context": CONTEXT_WEIGHT,
        },
        "floor_percent": round(100 * answer["floor"], 1),
        "hidden_by_labels": answer.get("explain", {}).get("hidden_by_labels", 0),
        "searched_as": collection.agent.agent_id,
    }


class PlaygroundAdminMixin:
    """Adds ``playground/`` (name ``collections_app_collection_playground``) to the Collection ModelAdmin."""

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("playground/", wrap(self.playground_view), name="collections_app_collection_playground"),
        ] + super().get_urls()

    def _search(self, request, data, *, reader, min_score, label):
        collection = data["collection"]
        named = reader.external_id if reader else None
        on_behalf_of = data["on_behalf_of"].agent_id if data["on_behalf_of"] else None
        try:
            # A person reading paragraphs as any reader is a read like an agent's: it is audited too.
            with audit.reading(
                kind=audit.SEARCH,
                channel=audit.ADMIN,
                key=None,
                agent_id=collection.agent.agent_id,
                staff=request.user.get_username(),
                target=collection.name,
                question=data["question"],
                reader=named,
                on_behalf_of=on_behalf_of,
            ) as read:
                answer = search_collection(
                    agent=collection.agent,
                    collection=collection,
                    question=data["question"],
                    reader=named,
                    on_behalf_of=on_behalf_of,
                    most=data["most"] or 5,
                    around=data["around"],
                    min_score=min_score,
                    explain=True,
                )
                read.answered(*quoted(answer))
        except RagsiteError as exc:
            self.message_user(request, f"{label}: {in_plain_words(exc, collection)}", messages.ERROR)
            return None
        return _laid_out(answer, collection, label)

    def may_use_playground(self, request) -> bool:
        """The playground shows paragraphs' text, any reader's: viewing collections alone is not enough."""
        return self.has_view_permission(request) and has_perm(request, "view", Paragraph)

    def playground_view(self, request):
        """Run a search exactly as the API would, through `search_collection`, and show everything it
        answers."""
        require(self.may_use_playground(request))
        answers = []
        if request.method == "POST":
            form = PlaygroundForm(request.POST)
            if form.is_valid():
                data = form.cleaned_data
                first = self._describe(data["reader"], data["min_score"])
                answers.append(
                    self._search(
                        request, data, reader=data["reader"], min_score=data["min_score"], label=first
                    )
                )
                if form.compares():
                    reader = data["compare_reader"] or data["reader"]
                    floor = (
                        data["compare_min_score"]
                        if data["compare_min_score"] is not None
                        else data["min_score"]
                    )
                    answers.append(
                        self._search(
                            request, data, reader=reader, min_score=floor, label=self._describe(reader, floor)
                        )
                    )
                answers = [a for a in answers if a is not None]
        else:
            form = PlaygroundForm(initial={"collection": request.GET.get("collection"), "most": 5})
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Search playground",
            "form": form,
            "answers": answers,
            "side_by_side": len(answers) > 1,
        }
        return TemplateResponse(request, "admin/collections_app/playground.html", context)

    @staticmethod
    def _describe(reader, floor) -> str:
        who = f"as {reader.external_id}" if reader else "as no reader"
        return who + ("" if floor is None else f", floor {floor:g}")
