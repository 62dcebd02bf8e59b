import json
import re
import types
import typing

from collections_app.schemas.search import SearchIn, search_arguments
from collections_app.services.agents import get_agent
from collections_app.services.search import search_collection
from ragsite.commands import ServiceCommand

# The reader is given by name here; an ID token (`readerToken`) is for agents, not the command line.
NOT_OPTIONS = ("question", "readerToken")


def option_type(annotation):
    """How a declared field's value is read from the command line: its number or text type, or JSON."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    return annotation if annotation in (int, float, str) else json.loads


class Command(ServiceCommand):
    help = "Search a collection as one of its agents."

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("name")
        parser.add_argument("question")
        # Every other field of the declared request, as an option (`onBehalfOf` is --on-behalf-of), so
        # the command takes what the API and the tool take, with the same defaults.
        for name, field in SearchIn.model_fields.items():
            if name in NOT_OPTIONS:
                continue
            parser.add_argument(
                "--" + re.sub(r"(?<=[a-z])([A-Z])", r"-\1", name).lower().replace("_", "-"),
                dest=name,
                type=option_type(field.annotation),
                default=field.default,
                help=field.description,
            )
        parser.add_argument("--json", action="store_true", help="print the answer as JSON")

    def handle(self, *args, **o):
        answer = search_collection(
            agent=get_agent(o["agent_id"]), collection=o["name"], reader=o["reader"], **search_arguments(o)
        )
        if o["json"]:
            self.print_json(answer)
            return
        refused = {None: "not judged", True: "refused by the judge", False: "approved by the judge"}[
            answer["refused"]
        ]
        self.stdout.write(
            f"mode {answer['mode']} ({answer['model']}), floor {answer['floor']}, around "
            f"{answer['around']}, {refused}"
        )
        if not answer["paragraphs"]:
            self.stdout.write("Nothing scored at or above the floor.")
        for p in answer["paragraphs"]:
            self.stdout.write(
                f"\n{p['score']:.3f}  {p['chunk_id']} § {p['section']}  ({p['passages']} paragraphs)"
            )
            self.stdout.write(p["text"])
