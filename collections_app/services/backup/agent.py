"""One agent as a backup archive, and back: the agent's settings and webhooks (never their secrets, never
its keys), and whatever the apps that keep agent data register as parts (`ragsite.backup.register_part`):
memory_app adds the agent's memories and episodes with their nodes. Its collections are archives of their
own.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from ragsite.backup import fields_of, parts, row_of
from ragsite.errors import Conflict, RagsiteError

from ...models import Agent, Webhook
from .archive import Archive

AGENT, WEBHOOKS = "agent.jsonl", "webhooks.jsonl"
WEBHOOK_KEEP = ("url", "events", "active", "description", "created_at")


def dump_agent(agent: Agent) -> Archive:
    rows = {
        AGENT: [row_of(agent)],
        # A hook's secret is a credential: a restored hook gets a new one, shown on its page.
        WEBHOOKS: [
            {k: v for k, v in row_of(hook).items() if k in WEBHOOK_KEEP}
            for hook in Webhook.objects.filter(agent=agent).order_by("pk")
        ],
    }
    for part in sorted(parts().values(), key=lambda p: p.name):
        for member, part_rows in part.dump(agent).items():
            rows[f"{part.name}/{member}"] = part_rows
    return Archive(
        manifest={
            "kind": "agent",
            "agent": agent.agent_id,
            "parts": sorted(parts()),
            "created_at": timezone.now().isoformat(),
        },
        rows=rows,
    )


def restore_agent(archive: Archive, *, agent_id: str | None = None) -> Agent:
    """Make the archive's agent again (as `agent_id` if given), with its webhooks and every registered part;
    refused when the agent exists (a restore never overwrites) or a part is unknown to this server."""
    if archive.manifest.get("kind") != "agent":
        raise RagsiteError("this archive holds a collection, not an agent", code="invalid_backup")
    unknown = sorted(set(archive.manifest.get("parts", [])) - set(parts()))
    if unknown:
        raise RagsiteError(
            f"this server cannot restore the part(s) {', '.join(unknown)}", code="invalid_backup"
        )
    [row] = archive.rows.get(AGENT) or [None]
    if row is None:
        raise RagsiteError(f"{AGENT} is missing from the archive", code="invalid_backup")
    agent_id = agent_id or row["agent_id"]
    with transaction.atomic():
        if Agent.objects.filter(agent_id=agent_id).exists():
            raise Conflict(
                f'agent "{agent_id}" already exists; restore it under another id', code="duplicate_agent"
            )
        agent = Agent.objects.create(**{**fields_of(Agent, row), "agent_id": agent_id})
        for hook in archive.rows.get(WEBHOOKS, []):
            Webhook.objects.create(agent=agent, **fields_of(Webhook, hook))
        for name in archive.manifest.get("parts", []):
            prefix = f"{name}/"
            parts()[name].restore(
                agent,
                {
                    member[len(prefix) :]: rows
                    for member, rows in archive.rows.items()
                    if member.startswith(prefix)
                },
            )
    return agent
