"""The ledger: model calls charged to agents. It records counts and costs, never text."""

from decimal import Decimal

from ..conf import settings
from ..models import Agent, Collection, ModelCall


def price(model: str, tokens_in: int, tokens_out: int) -> Decimal:
    """Cost from MODEL_PRICES (per 1,000 tokens, input and output); a model with no price costs 0."""
    entry = (settings.MODEL_PRICES or {}).get(model) or {}
    per_in = Decimal(str(entry.get("input", 0)))
    per_out = Decimal(str(entry.get("output", 0)))
    return (per_in * tokens_in + per_out * tokens_out) / Decimal(1000)


def record_call(
    *, agent: Agent, collection: Collection | None, purpose: str, model: str, tokens_in: int = 0, tokens_out: int = 0
) -> ModelCall:
    return ModelCall.objects.create(
        agent=agent,
        collection=collection,
        purpose=purpose,
        model=model[:200],
        tokens_in=max(0, int(tokens_in)),
        tokens_out=max(0, int(tokens_out)),
        cost=price(model, tokens_in, tokens_out),
    )
