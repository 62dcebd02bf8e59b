from collections_app.services.agents import get_agent
from memory_app import conf
from memory_app.services import check_health
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Report long memories and episodes whose record nodes are missing or were made by another "
        "model; with --repair, build at most --limit of them (default 50)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--repair", action="store_true", help="Build missing nodes (never modifies records)."
        )
        parser.add_argument("--agent", metavar="AGENT_ID", help="Only this agent's records.")
        parser.add_argument(
            "--limit",
            type=int,
            default=conf.REPAIR_LIMIT,
            help=f"Records to repair in this run, 0 to {conf.REPAIR_LIMIT} (the most one run builds).",
        )
        parser.add_argument("--json", action="store_true", help="Print the report as one JSON object.")

    def handle(self, *args, repair, agent, limit, json, **options):
        report = check_health(agent=get_agent(agent) if agent else None, repair=repair, limit=limit)
        if json:
            self.print_json(report)
            return
        window = report["window"] if report["can_divide"] else "unknown (no nodes can be built)"
        self.stdout.write(f"model {report['model']}, window {window}")
        self.stdout.write(
            f"{report['records']} records, {report['long_records']} long, "
            f"{report['missing_nodes']} missing nodes, {report['stale_nodes']} with another model's nodes, "
            f"{report['unknown_length']} of unknown length"
        )
        if report.get("orphan_nodes"):
            self.stdout.write(f"{report['orphan_nodes']} orphan nodes")
        if report["missing_triggers"]:
            self.stderr.write("missing triggers: " + ", ".join(report["missing_triggers"]))
        if repair:
            built = sum(1 for item in report["repaired"] if item["status"] == "built")
            self.stdout.write(
                f"repaired {len(report['repaired'])} records ({built} divided), {report['remaining']} remain"
            )
