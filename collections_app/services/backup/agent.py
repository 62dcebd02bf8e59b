"""One agent as a backup archive, and back: the agent's settings and webhooks (their signing secrets only
when the operator asks, sealed with the operator's key; never its API keys), and whatever the apps that
keep agent data register as parts (`ragsite.backup.register_part`): memory_app adds the agent's memories
and episodes with their nodes. Its collections are archives of their own.
"""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from ragsite.backup import fields_of, parts, row_of
from ragsite.errors import Conflict, RagsiteError

from ...models import Agent, Webhook
from .archive import Archive
from .credentials import SEALED, CredentialsError, open_credential, seal_credential

AGENT, WEBHOOKS = "agent.jsonl", "webhooks.jsonl"
WEBHOOK_KEEP = ("url", "events", "active", "description", "created_at")


def dump_agent(agent: Agent, *, credentials_key: str | None = None) -> Archive:
    """The agent's archive; with `credentials_key` (a Fernet key of the operator's) each hook's signing
    secret too, sealed with it. Without it a restored hook gets a new secret, shown on its page."""
    hooks = []
    for hook in Webhook.objects.filter(agent=agent).order_by("pk"):
        row = {k: v for k, v in row_of(hook).items() if k in WEBHOOK_KEEP}
        if credentials_key is not None and hook.secret:
            row["secret"] = seal_credential(credentials_key, hook.secret)
        hooks.append(row)
    rows = {AGENT: [row_of(agent)], WEBHOOKS: hooks}
    for part in sorted(parts().values(), key=lambda p: p.name):
        for member, part_rows in part.dump(agent).items():
            rows[f"{part.name}/{member}"] = part_rows
    manifest = {
        "kind": "agent",
        "agent": agent.agent_id,
        "parts": sorted(parts()),
        "created_at": timezone.now().isoformat(),
    }
    if credentials_key is not None:
        manifest["credentials"] = SEALED
    return Archive(manifest=manifest, rows=rows)


def _opened_secrets(archive: Archive, credentials_key: str | None) -> list[str | None]:
    """Each hook's secret opened with the operator's key (None: a new one is made), checked before anything
    is written; an archive with sealed secrets restored without the key gives its hooks new ones."""
    hooks = archive.rows.get(WEBHOOKS, [])
    if credentials_key is None or archive.manifest.get("credentials") != SEALED:
        if credentials_key is not None:
            raise RagsiteError("this archive holds no credentials to open", code="invalid_backup")
        return [None] * len(hooks)
    try:
        return [
            open_credential(credentials_key, hook["secret"], where=f"{WEBHOOKS} line {number}")
            if "secret" in hook
            else None
            for number, hook in enumerate(hooks, start=1)
        ]
    except CredentialsError as exc:
        raise RagsiteError(str(exc), code="invalid_backup") from None


def restore_agent(
    archive: Archive, *, agent_id: str | None = None, credentials_key: str | None = None
) -> Agent:
    """Make the archive's agent again (as `agent_id` if given), with its webhooks and every registered part;
    refused when the agent exists (a restore never overwrites), a part is unknown to this server, or
    `credentials_key` does not open the hooks' sealed secrets (checked before anything is written)."""
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
    secrets = _opened_secrets(archive, credentials_key)
    with transaction.atomic():
        if Agent.objects.filter(agent_id=agent_id).exists():
            raise Conflict(
                f'agent "{agent_id}" already exists; restore it under another id', code="duplicate_agent"
            )
        agent = Agent.objects.create(**{**fields_of(Agent, row), "agent_id": agent_id})
        for hook, secret in zip(archive.rows.get(WEBHOOKS, []), secrets, strict=True):
            values = fields_of(Webhook, hook, skip=("secret",))
            Webhook.objects.create(agent=agent, **values, **({"secret": secret} if secret else {}))
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
