from pathlib import Path

from collections_app.services.agents import get_agent, get_collection
from collections_app.services.interchange import export_index
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Write a collection's current build as DIRECTORY/rag/NAME/ "
        "(meta.json, docs.jsonl, vectors.f32, bm25.idx)."
    )

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("name")
        parser.add_argument("directory", type=Path)
        parser.add_argument("--json", action="store_true", help="print one JSON line with the result")

    def handle(self, *args, agent_id, name, directory, json, **options):
        collection = get_collection(agent=get_agent(agent_id), name=name)
        target = export_index(collection=collection, directory=directory)
        paragraphs = collection.built.passages
        if json:
            self.print_json({"index_id": name, "directory": str(target)})
        else:
            self.stdout.write(f"Exported {name} ({paragraphs} paragraphs in the build) to {target}")
