"""The read audit: one row per read that answered text (or was refused), written by `ragsite.audit`.

Agents never read it: no API route or MCP tool lists it, and staff need its own view permission. It
holds ids and sizes, never paragraph or record text; the question only where `AUDIT_QUESTIONS=text`.
Agent and key are kept as plain values, not foreign keys, so the trail outlives a deleted agent.

No index but the key: every search writes a row, and each index is one more page written per search
(on SQLite's 32 KB pages, the difference between about 0.9 ms and 2-4 ms added to a search at load
~8, bench/audit/audit_cost.py). The admin's filters and the purge, run by staff and hourly, scan instead.
"""

from django.db import models
from django.utils import timezone


class ReadAudit(models.Model):
    at = models.DateTimeField(default=timezone.now)
    channel = models.CharField(
        max_length=10,
        help_text="api, mcp, openai (/v1/vector_stores), dify (/api/v1/retrieval), or admin (the "
        "playground).",
    )
    kind = models.CharField(max_length=24, help_text="What was read: search, paragraph, recall, record, …")
    agent_id = models.CharField(max_length=100)
    key_id = models.BigIntegerField(null=True, blank=True, help_text="The API key's id (its row).")
    staff_user = models.CharField(
        max_length=150, blank=True, help_text="The person, for a read in the admin."
    )
    on_behalf_of = models.CharField(max_length=200, blank=True)
    reader = models.CharField(max_length=200, blank=True)
    target = models.CharField(
        max_length=200, blank=True, help_text="The collection (or vector store), or the memory kind."
    )
    question = models.TextField(blank=True, help_text="Kept only where AUDIT_QUESTIONS=text.")
    question_sha256 = models.CharField(max_length=64, blank=True)
    ids = models.JSONField(default=list, blank=True, help_text="Chunk ids or record ids returned.")
    size = models.PositiveIntegerField(default=0, help_text="Characters of text returned.")
    status = models.PositiveSmallIntegerField(default=200)

    class Meta:
        db_table = "audit_reads"
        # Newest first by the key: the table has no other index (below).
        ordering = ["-id"]
        verbose_name = "read audit entry"
        verbose_name_plural = "read audit"
        # Entries are written by reads only: nobody adds, changes or deletes one by hand.
        default_permissions = ("view",)
        permissions = [("export_readaudit", "Can export the read audit")]

    def __str__(self):
        return f"{self.kind} by {self.agent_id} at {self.at:%Y-%m-%d %H:%M:%S}"
