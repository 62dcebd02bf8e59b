"""`make run`'s set-up step: the demo agent, the sample handbook, an admin login, and what to do next.

Everything is said once, labelled, on stderr. With `--summary FILE` the login and key lines are also
written to FILE (readable by its owner only) for `config.serve`, which repeats them in a box once the
server answers, below the start-up lines they would otherwise scroll away under, and deletes FILE.
"""

import os
from pathlib import Path

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
        parser.add_argument(
            "--summary",
            default="",
            metavar="FILE",
            help="also write the login and key lines to FILE, for `python -m config.serve --summary FILE`",
        )

    def handle(self, *args, agent, collection, new_key, host, port, summary, **options):
        result = set_up_demo(
            agent_id=agent,
            collection_name=collection,
            new_key=new_key,
            admin_user=settings.ADMIN_USER,
            admin_password=settings.ADMIN_PASSWORD,
        )
        # A server listening on every interface is still reached locally at 127.0.0.1.
        base = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::', '') else host}:{port}"
        box: list[str] = []

        def say(line: str, *, boxed: str = "") -> None:
            self.stderr.write(line)
            if boxed:
                box.append(boxed)

        if result.known_answers is not None:
            say(
                f"Gave {collection} {result.known_answers} known answers and controls; its floor is measured."
            )
        if result.build is not None:
            say(f"Built {collection}: {result.build.status}, {result.build.passages} paragraphs.")
        say(f"ragsite will answer at {base}/", boxed=f"ragsite answers at {base}/")
        admin = f'Admin:    {base}/admin/  user "{result.admin_user}"'
        if result.admin_password:
            line = f"{admin}, password (shown once): {result.admin_password}"
            say(f"  {line}", boxed=line)
        elif result.admin_created:
            say(f"  {admin} with the password in ADMIN_PASSWORD", boxed=f"{admin}, password: ADMIN_PASSWORD")
        else:
            reset = f".venv/bin/python manage.py changepassword {result.admin_user}"
            say(f"  {admin} (exists; to reset its password: {reset})", boxed=f"{admin} (reset: {reset})")
        if result.new_key:
            line = f'API key:  {result.new_key}  (agent "{agent}", shown once)'
            say(f"  {line}", boxed=line)
            key = result.new_key
        else:
            say(
                f'  Agent "{agent}" has {result.active_keys} active key(s), shown when each was issued; '
                "`make run NEW_KEY=1` issues another (none is revoked).",
                boxed=f'API key:  agent "{agent}" has {result.active_keys}; `make run NEW_KEY=1` for another',
            )
            key = "<your key>"
        say(
            f"  Try:    curl -s -H 'Authorization: Bearer {key}' -H 'Content-Type: application/json' "
            f'-d \'{{"question": "How many leave days carry over?"}}\' '
            f"{base}/api/v1/collections/{collection}/search"
        )
        say(
            f"  API docs: {base}/api/v1/docs",
            boxed=f"Docs:     {base}/api/v1/docs  (OpenAI base URL: {base}/v1)",
        )
        if summary:
            write_private(Path(summary), "\n".join(box) + "\n")


def write_private(path: Path, text: str) -> None:
    """`text` in a file only its owner may read (it may hold a password), replacing any earlier one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
