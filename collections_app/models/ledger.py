"""The ledger: one row per model call, charged to the agent named in `onBehalfOf`."""

from django.db import models
from django.utils import timezone

from .agents import Agent
from .collections import Collection


class ModelCall(models.Model):
    """The ledger: one model call charged to one agent. Never the question, never a paragraph."""

    JUDGE, EMBED, RERANK = "judge", "embed", "rerank"

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="model_calls")
    collection = models.ForeignKey(Collection, on_delete=models.SET_NULL, null=True, blank=True)
    purpose = models.CharField(
        max_length=20, choices=[(JUDGE, "judge"), (EMBED, "embed"), (RERANK, "rerank")]
    )
    model = models.CharField(max_length=200)
    tokens_in = models.PositiveIntegerField(default=0)
    tokens_out = models.PositiveIntegerField(default=0)
    cost = models.DecimalField(max_digits=14, decimal_places=6, default=0)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "model call"

    def __str__(self):
        return f"{self.purpose} for {self.agent} ({self.model})"
