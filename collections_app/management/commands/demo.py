"""`make run`'s set-up step: the demo agent, the sample handbook, an admin login, and what to do next."""

from collections_app.conf import settings
from collections_app.services.demo import set_up_demo
from ragsite.commands import ServiceCommand


class Command(ServiceCommand):
    help = (
        "Create (once) the demo agent and its key, the sample handbook under KNOWLEDGE_ROOT and built, "
        "with its known answers, and an admin user; then say how to log in and search."
    )

    def add_arguments(self, parser):
        parser.add_argument("--agent", default="demo")
        parser.add_argument("--collection", default="handbook")
        parser.add_argument(
            "--new-key", action="store_true", help="issue another key for the demo agent (none is revoked)"
        )
        parser.add_argument(
            "--host", default="127.0.0.1", help="where the server will listen (for the hints)"
        )
        parser.add_argument("--port", default="8000", help="the server's port (for the hints)")

    def handle(self, *args, agent, collection, new_key, host, port, **options):
        result = set_up_demo(
            agent_id=agent,
            collection_name=collection,
            new_key=new_key,
            admin_user=settings.ADMIN_USER,
            admin_password=settings.ADMIN_PASSWORD,
        )
        # A server listening on every interface is still reached locally at 127.0.0.1.
        base = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{port}"
        say = self.stderr.write
        if result.known_answers is not None:
            say(
                f"Gave {collection} {result.known_answers} known answers and controls; its floor is measured."
            )
        if result.build is not None:
            say(f"Built {collection}: {result.build.status}, {result.build.passages} paragraphs.")
        say(f"ragsite will answer at {base}/")
        if result.admin_password:
            say(
                f'  Admin:  {base}/admin/  user "{result.admin_user}", password (shown once): '
                f"{result.admin_password}"
            )
        elif result.admin_created:
            say(f'  Admin:  {base}/admin/  user "{result.admin_user}" with the password in ADMIN_PASSWORD')
        else:
            say(
                f'  Admin:  {base}/admin/  user "{result.admin_user}" (exists; to reset its password: '
                f".venv/bin/python manage.py changepassword {result.admin_user})"
            )
        if result.new_key:
            say(f'  API key of agent "{agent}" (shown once): {result.new_key}')
            key = result.new_key
        else:
            say(
                f'  Agent "{agent}" has {result.active_keys} active key(s), shown when each was issued; '
                "`make run NEW_KEY=1` issues another (none is revoked)."
            )
            key = "<your key>"
        say(
            f"  Try:    curl -s -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' "
            f'-d \'{{"question": "How many leave days carry over?"}}\' '
            f"{base}/api/v1/collections/{collection}/search"
        )
        say(f"  API docs: {base}/api/v1/docs")
        if result.new_key:
            # The key alone on stdout, for scripts.
            self.stdout.write(result.new_key)
