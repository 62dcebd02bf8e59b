from collections_app.services import sync, sync_check
from collections_app.services.agents import get_agent, get_collection
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Keep a collection current by itself: check its folder every N minutes and build when it changed "
        "(--every), stop (--off), or check it now (--check)."
    )

    def add_arguments(self, parser):
        parser.add_argument("agent_id")
        parser.add_argument("name")
        what = parser.add_mutually_exclusive_group(required=True)
        what.add_argument(
            "--every",
            type=int,
            metavar="MINUTES",
            help=f"minutes between checks ({sync.MIN_EVERY}-{sync.MAX_EVERY})",
        )
        what.add_argument("--off", action="store_true", help="stop syncing (the period is kept)")
        what.add_argument(
            "--check",
            action="store_true",
            help="check the folder now and queue a build if it changed (a qcluster carries it out)",
        )
        parser.add_argument("--json", action="store_true", help="print one JSON line with the result")

    def handle(self, *args, agent_id, name, every, off, check, json, **options):
        collection = get_collection(agent=get_agent(agent_id), name=name)
        if check:
            found = sync_check.check_source(collection=collection)
            result = {
                "new": found.new,
                "changed": found.changed,
                "deleted": found.deleted,
                "build": found.build.pk if found.build else None,
                "outcome": found.outcome,
            }
            return self.print_json(result) if json else self.stdout.write(f"{name}: {found.outcome}")
        sync.set_sync(collection=collection, every=None if off else every)
        shown = sync.describe(collection)
        if json:
            return self.print_json(shown)
        if shown is None:
            return self.stdout.write(f"{name} no longer syncs; it is built only when asked.")
        self.stdout.write(
            f"{name} is checked every {shown['sync_every']} minutes; next check at "
            f"{shown['next_check_at']:%Y-%m-%d %H:%M:%S %Z}."
        )
