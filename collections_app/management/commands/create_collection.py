from collections_app.services.agents import create_collection, get_agent
from collections_app.text.chunking import AVAILABLE
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = "Create a collection for an agent."

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("name")
        parser.add_argument(
            "--folder",
            default="",
            help="the sub-folder of KNOWLEDGE_ROOT/<agent id>/ to build from, by name (not a path)",
        )
        parser.add_argument("--method", default="structure", help=f"chunking method: {', '.join(AVAILABLE)}")
        parser.add_argument("--size", type=int, default=None)
        parser.add_argument("--overlap", type=int, default=None)
        parser.add_argument(
            "--built-from", default="", help='what the documents are, for people ("the HR share")'
        )
        parser.add_argument(
            "--analyzer",
            default=None,
            help="how the keyword leg reads words: simple, cjk, english or another Snowball language "
            "(docs/collections.md); default: ANALYZER",
        )
        parser.add_argument("--per-reader", action="store_true", help="searches must name a reader")
        parser.add_argument(
            "--judge", action="store_true", help="ask the judge model whether paragraphs answer"
        )
        parser.add_argument(
            "--sync-every",
            type=int,
            default=None,
            metavar="MINUTES",
            help="check the folder every N minutes and build when it changed (see sync_collection); "
            "default: SYNC_EVERY for a collection with --folder",
        )
        parser.add_argument(
            "--no-sync", action="store_true", help="build only when asked, never on a folder change"
        )

    def handle(self, *args, **o):
        collection = create_collection(
            agent=get_agent(o["agent_id"]),
            name=o["name"],
            folder=o["folder"],
            method=o["method"],
            built_from=o["built_from"],
            analyzer=o["analyzer"],
            per_reader=o["per_reader"],
            judge=o["judge"],
            size=o["size"],
            overlap=o["overlap"],
            sync_every=None if o["no_sync"] else (o["sync_every"] or "default"),
        )
        self.stdout.write(
            f'Created collection "{collection.name}" for agent "{collection.agent.agent_id}" '
            f"({collection.method}, {collection.analyzer} analyzer)."
        )
