from collections_app.services.agents import create_agent
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = "Create an agent and print its API key once, alone on the last line."

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("--name", default="")

    def handle(self, *args, agent_id, name, **options):
        agent, raw = create_agent(agent_id=agent_id, name=name)
        self.stderr.write(f'Created agent "{agent.agent_id}". Its API key follows; it is not shown again.')
        self.stdout.write(raw)
