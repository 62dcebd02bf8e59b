"""The ledger: model calls charged to agents. It records counts and costs, never text.

Agents own the ledger, whichever app made the call, so memory may charge it too (the architecture
test lets memory import this module beside the agent look-up).
"""

from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from decimal import Decimal

from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from ragsite import instruments
from ragsite.errors import TooManyRequests

from ..conf import settings
from ..models import Agent, Collection, ModelCall


def price(model: str, tokens_in: int, tokens_out: int) -> Decimal:
    """Cost from MODEL_PRICES (per 1,000 tokens, input and output); a model with no price costs 0."""
    entry = (settings.MODEL_PRICES or {}).get(model) or {}
    per_in = Decimal(str(entry.get("input", 0)))
    per_out = Decimal(str(entry.get("output", 0)))
    return (per_in * tokens_in + per_out * tokens_out) / Decimal(1000)


def record_call(
    *,
    agent: Agent,
    collection: Collection | None,
    purpose: str,
    model: str,
    tokens_in: int = 0,
    tokens_out: int = 0,
) -> ModelCall:
    call = ModelCall.objects.create(
        agent=agent,
        collection=collection,
        purpose=purpose,
        model=model[:200],
        tokens_in=max(0, int(tokens_in)),
        tokens_out=max(0, int(tokens_out)),
        cost=price(model, tokens_in, tokens_out),
    )
    instruments.MODEL_CALLS.labels(purpose=purpose, model=call.model).inc()
    instruments.MODEL_TOKENS.labels(purpose=purpose, direction="in").inc(call.tokens_in)
    instruments.MODEL_TOKENS.labels(purpose=purpose, direction="out").inc(call.tokens_out)
    instruments.MODEL_COST.labels(purpose=purpose).inc(float(call.cost))
    return call


@dataclass(frozen=True)
class DaySpend:
    """One day of an agent's ledger: calls, tokens and cost."""

    day: date
    calls: int
    tokens_in: int
    tokens_out: int
    cost: Decimal


def spend_by_day(agent: Agent, days: int = 30) -> list[DaySpend]:
    """The agent's spend per day over the last `days` days (today included), oldest first, empty days as
    zero."""
    days = max(1, min(int(days), 366))
    today = timezone.localdate()
    first = today - timedelta(days=days - 1)
    start = timezone.make_aware(datetime.combine(first, time.min))
    rows = (
        ModelCall.objects.filter(agent=agent, created_at__gte=start)
        .annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(
            calls=Count("id"), tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"), cost=Sum("cost")
        )
    )
    by_day = {row["day"]: row for row in rows}
    result = []
    for offset in range(days):
        day = first + timedelta(days=offset)
        row = by_day.get(day) or {}
        result.append(
            DaySpend(
                day=day,
                calls=row.get("calls") or 0,
                tokens_in=row.get("tokens_in") or 0,
                tokens_out=row.get("tokens_out") or 0,
                cost=Decimal(row.get("cost") or 0),
            )
        )
    return result


def spent_today(agent: Agent) -> float:
    start = timezone.now().replace(hour=0, minute=0, second=0, microsecond=0)
    total = ModelCall.objects.filter(agent=agent, created_at__gte=start).aggregate(total=Sum("cost"))["total"]
    return float(total or 0)


def over_budget(payer: Agent | None) -> bool:
    """Whether `payer` spent its daily budget today: an optional model call (rerank, judge) is skipped.
    Nobody paying, or no budget, is never over."""
    return (
        payer is not None
        and payer.daily_budget is not None
        and spent_today(payer) >= float(payer.daily_budget)
    )


def check_runaway(payer: Agent | None) -> None:
    """429 when `payer` made its runaway limit of model calls in the last minute (searches and the
    embedding endpoints share it); nothing to check when nobody pays."""
    if payer is None or not payer.runaway_limit:
        return
    since = timezone.now() - timedelta(seconds=60)
    recent = ModelCall.objects.filter(agent=payer, created_at__gte=since)
    if recent.count() >= payer.runaway_limit:
        oldest = recent.order_by("created_at").values_list("created_at", flat=True).first()
        wait = max(1, int(60 - (timezone.now() - oldest).total_seconds()) + 1) if oldest else 60
        raise TooManyRequests(
            f'agent "{payer.agent_id}" made {payer.runaway_limit} model calls in the last minute; try again '
            "later",
            code="runaway_limit",
            headers={"Retry-After": str(wait)},
        )
