"""Set up a demo: an agent with a key, and the bundled sample documents built into a collection."""

from collections_app import conf
from collections_app.models import Agent, ApiKey, Collection
from collections_app.services import known_answers
from collections_app.services.agents import create_agent, create_collection, issue_key
from collections_app.services.builds import build_collection
from ragsite.commands import ServiceCommand


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
        # Before the build, so that the build is measured against them.
        given = known_answers.give_sample_set(collection=handbook)
        if given is not None:
            self.stderr.write(f"Gave {collection} {len(given)} known answers and controls; its floor is measured.")
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
