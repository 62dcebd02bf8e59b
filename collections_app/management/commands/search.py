from collections_app.services.agents import get_agent
from collections_app.services.search import search_collection
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = "Search a collection as one of its agents."

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("name")
        parser.add_argument("question")
        parser.add_argument("--reader", default=None)
        parser.add_argument("--on-behalf-of", default=None, dest="on_behalf_of")
        parser.add_argument("--most", type=int, default=5)
        parser.add_argument("--around", type=int, default=None)
        parser.add_argument("--min-score", type=float, default=None, dest="min_score")
        parser.add_argument("--json", action="store_true", help="print the answer as JSON")

    def handle(self, *args, **o):
        answer = search_collection(
            agent=get_agent(o["agent_id"]),
            collection=o["name"],
            question=o["question"],
            reader=o["reader"],
            on_behalf_of=o["on_behalf_of"],
            most=o["most"],
            around=o["around"],
            min_score=o["min_score"],
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
