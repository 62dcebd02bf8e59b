from pathlib import Path

from collections_app.services.agents import get_agent
from collections_app.services.interchange import import_index
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = "Import DIRECTORY/rag/INDEX_ID/ into a collection (INDEX_ID, or --name), replacing its paragraphs."

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("directory", type=Path)
        parser.add_argument("index_id")
        parser.add_argument("--name", default=None, help="the collection to import into; default INDEX_ID")
        parser.add_argument("--json", action="store_true", help="print one JSON line with the result")

    def handle(self, *args, agent_id, directory, index_id, name, json, **options):
        collection = import_index(
            agent=get_agent(agent_id), directory=directory, index_id=index_id, name=name
        )
        built = collection.built
        if json:
            self.print_json(
                {
                    "collection": collection.name,
                    "paragraphs": built.passages,
                    "model": built.model,
                    "dimensions": built.dimensions,
                }
            )
        else:
            self.stdout.write(
                f"Imported {index_id} into {collection.name}: {built.passages} paragraphs, "
                f"{built.model} ({built.dimensions} dimensions)"
            )
