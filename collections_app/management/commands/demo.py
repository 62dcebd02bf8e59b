"""Set up a demo: an agent with a key, and the bundled sample documents built into a collection."""

from pathlib import Path

from collections_app import conf
from collections_app.models import Agent, ApiKey, Collection
from collections_app.services import known_answers
from collections_app.services.agents import create_agent, create_collection, issue_key
from collections_app.services.builds import build_collection
from ragsite.commands import ServiceCommand

# The sample handbook's own questions and controls (beside sample_docs/, so a build never reads it as a document).
SAMPLE_KNOWN_ANSWERS = Path(__file__).resolve().parents[2] / "sample_known_answers.jsonl"


class Command(ServiceCommand):
    help = (
        "Create the demo agent, print a fresh API key, give the sample handbook its known answers and build it once."
    )

    def add_arguments(self, parser):
        parser.add_argument("--agent", default="demo")
        parser.add_argument("--collection", default="handbook")

    def handle(self, *args, agent, collection, **options):
        demo = Agent.objects.filter(agent_id=agent).first()
        if demo is None:
            demo, raw = create_agent(agent_id=agent, name="Demo agent")
        else:
            _key, raw = issue_key(agent=demo, name="make run")
        handbook = Collection.objects.filter(agent=demo, name=collection).first()
        if handbook is None:
            handbook = create_collection(agent=demo, name=collection, built_from="the bundled sample handbook")
        if not handbook.known_answers.exists():
            # Before the build, so the build is measured; its floor is read off them.
            items = known_answers.parse_jsonl(SAMPLE_KNOWN_ANSWERS.read_bytes())
            known_answers.set_known_answers(collection=handbook, items=items, floor_measured=True)
            self.stderr.write(f"Gave {collection} {len(items)} known answers and controls; its floor is measured.")
        if conf.knowledge_folder(collection) is None:
            self.stderr.write(f"{conf.folder_variable(collection)} is not set; skipping the sample build.")
        elif not hasattr(handbook, "built"):
            run = build_collection(collection=handbook, requested_by="demo")
            self.stderr.write(f"Built {collection}: {run.status}, {run.passages} paragraphs.")
        keys = ApiKey.objects.active().filter(agent=demo).count()
        self.stderr.write(
            f'Demo agent "{agent}" ({keys} active keys). Try:\n'
            f"  curl -s -H 'Authorization: Bearer <key>' -H 'Content-Type: application/json' "
            f"-d '{{\"question\": \"How many leave days carry over?\"}}' "
            f"http://127.0.0.1:8000/api/v1/collections/{collection}/search\n"
            "The demo agent's new API key (shown once):"
        )
        self.stdout.write(raw)
