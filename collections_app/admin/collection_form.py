"""A collection's form on its admin page: name, folder, chunking method, sync (admin/collections.py)."""

import json

from django import forms

from ragsite.analyzers import ANALYZERS

from .. import conf
from ..models import (
    Agent,
    Collection,
)
from ..services.analyzers import ANALYZER_CHANGED
from ..services.knowledge import available_folders, binding_problem, collection_name_problem
from ..services.readers.labels import PER_READER_SWITCHED
from ..text.chunking import AVAILABLE
from .sync import sync_form_fields, sync_initial


class CollectionForm(forms.ModelForm):
    # Only the strategies that exist are offered; a planned one is not a choice. The initial value is the
    # model's (and the command's) default, which a plain ChoiceField would lose.
    method = forms.ChoiceField(
        choices=[(name, name) for name in AVAILABLE], initial=Collection._meta.get_field("method").default
    )

    # Every analyzer (ragsite.analyzers); a new collection starts at ANALYZER, as one made by the API does.
    # Not required: a form posted without it (a script, an older page) keeps the collection's analyzer.
    analyzer = forms.ChoiceField(
        choices=[(name, name) for name in ANALYZERS],
        required=False,
        help_text=Collection._meta.get_field("analyzer").help_text,
    )

    # The sub-folders of the agent's folder in KNOWLEDGE_ROOT as they are now (no restart needed), by name
    # only.
    folder = forms.ChoiceField(required=False, help_text=Collection._meta.get_field("folder").help_text)

    sync, sync_every = sync_form_fields()  # saved through the sync service (admin/sync.py)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["folder"].choices = folder_choices(self.instance)
        if "analyzer" in self.fields and not self.instance.pk:
            self.fields["analyzer"].initial = conf.default_analyzer()
        if "agent" in self.fields:
            # The add page's script shows only the picked agent's group of folders (its optgroup label).
            agents = {str(pk): agent_id for pk, agent_id in Agent.objects.values_list("pk", "agent_id")}
            self.fields["folder"].widget.attrs["data-agents"] = json.dumps(agents)
        sync_initial(self)
        if "name" in self.fields:
            # Plain text: the admin's fieldset template (templates/admin/includes) escapes help text.
            self.fields["name"].help_text = (
                "Letters, digits, '-' and '_'; the name cannot be changed once saved. The documents come "
                "from the folder chosen below, or from KNOWLEDGE_<AGENT>__<NAME>_FOLDER when that is set (or "
                "KNOWLEDGE_<NAME>_FOLDER, once bound below)."
            )
        # A user who may only view collections gets read-only fields: the form then holds none of these.
        for name, label, help_text in [
            (
                "min_score",
                "Floor",
                "The lowest score a result may have (0–1); empty = this server's MIN_SCORE.",
            ),
            (
                "around",
                "Neighbours",
                "Paragraphs either side of a hit that come back with it; empty = AROUND.",
            ),
            (
                "per_reader",
                None,
                "Off by default: every reader sees every paragraph and labels are kept but ignored. "
                "On: every search must name a reader, and a labelled paragraph is seen only by readers "
                "holding one of its labels.",
            ),
        ]:
            if name in self.fields:
                self.fields[name].label = label or self.fields[name].label
                self.fields[name].help_text = help_text

    class Meta:
        model = Collection
        fields = [
            "agent",
            "name",
            "built_from",
            "folder",
            "folder_variable_bound",
            "method",
            "size",
            "overlap",
            "analyzer",
            "per_reader",
            "judge",
            "min_score",
            "floor_measured",
            "around",
        ]

    def clean_analyzer(self) -> str:
        chosen = self.cleaned_data.get("analyzer")
        return chosen or (self.instance.analyzer if self.instance.pk else conf.default_analyzer())

    def clean(self):
        cleaned = super().clean()
        agent = cleaned.get("agent") or (self.instance.agent if self.instance.agent_id else None)
        folder = cleaned.get("folder") or ""
        if agent is not None and folder and folder != self.initial.get("folder"):
            if folder not in available_folders(agent):
                self.add_error(
                    "folder", f'agent "{agent.agent_id}" has no folder "{folder}" under KNOWLEDGE_ROOT'
                )
        name = cleaned.get("name") or self.instance.name
        if agent is not None and name and not self.instance.pk:
            taken = collection_name_problem(agent=agent, name=name)
            if taken:
                self.add_error("name", taken)
        problem = (
            name
            and cleaned.get("folder_variable_bound")
            and binding_problem(name=name, collection_pk=self.instance.pk)
        )
        if problem:
            self.add_error("folder_variable_bound", problem)
        if "per_reader" in self.changed_data and self.instance.pk and hasattr(self.instance, "built"):
            self.instance.rebuild_needed = PER_READER_SWITCHED
        # Compared with the stored value, not `changed_data`: a form posted without the field keeps it.
        self.analyzer_changed = bool(self.instance.pk) and cleaned.get("analyzer") != self.instance.analyzer
        if self.analyzer_changed and hasattr(self.instance, "built"):
            self.instance.rebuild_needed = ANALYZER_CHANGED
        if cleaned.get("per_reader") and cleaned.get("floor_measured"):
            self.add_error(
                "floor_measured",
                "a per-reader collection answers at its configured floor: one "
                "measured over every paragraph would depend on paragraphs a reader may not read",
            )
        return cleaned


def folder_choices(collection: Collection) -> list:
    """Each agent's folders grouped under its name (only the collection's own agent once it has one)."""
    agents = [collection.agent] if collection.agent_id else Agent.objects.order_by("agent_id")
    choices: list = [("", "— none (uploads, or a KNOWLEDGE_…_FOLDER variable) —")]
    for agent in agents:
        names = available_folders(agent)
        if collection.folder and collection.agent_id == agent.pk and collection.folder not in names:
            names = [
                *names,
                collection.folder,
            ]  # keep a vanished choice visible rather than silently dropping it
        if names:
            choices.append((agent.agent_id, [(name, name) for name in names]))
    return choices
