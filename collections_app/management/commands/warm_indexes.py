from collections_app.services.indexes.warm import warm_indexes
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Fetch and verify every live build's search index into this node's INDEX_DIR before it takes "
        "traffic (gunicorn's master does the same at start)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--no-verify",
            action="store_true",
            help="trust a copy already here that opens (skip the full checksum read of its files)",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON line per collection")

    def handle(self, *args, no_verify, json, **options):
        warmed = warm_indexes(verify=not no_verify)
        for item in warmed:
            if json:
                self.print_json(
                    {
                        "agent": item.agent_id,
                        "collection": item.collection,
                        "outcome": item.outcome,
                        "seconds": round(item.seconds, 3),
                    }
                )
            else:
                self.stdout.write(f"{item.agent_id}/{item.collection}: {item.outcome} in {item.seconds:.2f}s")
        failed = [item for item in warmed if item.outcome == "failed"]
        if failed:
            raise SystemExit(1)
