from collections_app import conf
from collections_app.services.agents import get_agent, get_collection
from collections_app.services.knowledge import bind_folder_variable
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Let one agent's collection read KNOWLEDGE_<NAME>_FOLDER, the variable without an agent "
        "(at most one collection of a name; --unbind takes it back)."
    )

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("name")
        parser.add_argument("--unbind", action="store_true", help="stop reading the agent-less variable")

    def handle(self, *args, agent_id, name, unbind, **options):
        collection = bind_folder_variable(
            collection=get_collection(agent=get_agent(agent_id), name=name), bound=not unbind
        )
        variable = conf.folder_variable(name)
        state = "no longer reads" if unbind else "now reads"
        self.stdout.write(f"Collection {collection} {state} {variable}.")
