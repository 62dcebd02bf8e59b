"""The django-q2 schedules memory needs, created idempotently.

`ensure_schedules` is run by `manage.py setup_schedules` and after every `migrate` (a
post_migrate receiver), so `make run` gets the schedule without a separate step.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS

from . import conf

HEALTH_REPAIR = "memory: repair record nodes"
HEALTH_REPAIR_FUNC = "memory_app.tasks.repair_record_nodes"


def ensure_schedules(using: str = DEFAULT_DB_ALIAS) -> list[str]:
    """Create or update memory's schedules; returns the names created (not those updated).

    Updating keeps the schedule's next run, so running this again never postpones a repair;
    only the function and the interval (`HEALTH_REPAIR_MINUTES`) are brought up to date.
    """
    from django_q.models import Schedule

    minutes = conf.health_repair_minutes()
    existing = Schedule.objects.using(using).filter(name=HEALTH_REPAIR).order_by("pk")
    schedule = existing.first()
    if schedule is None:
        Schedule.objects.using(using).create(
            name=HEALTH_REPAIR,
            func=HEALTH_REPAIR_FUNC,
            schedule_type=Schedule.MINUTES,
            minutes=minutes,
            repeats=-1,
        )
        return [HEALTH_REPAIR]
    # A duplicate (two processes racing on the first run) would repair twice as often.
    existing.exclude(pk=schedule.pk).delete()
    changed = (
        schedule.func != HEALTH_REPAIR_FUNC
        or schedule.minutes != minutes
        or schedule.schedule_type != Schedule.MINUTES
    )
    if changed:
        schedule.func, schedule.minutes, schedule.schedule_type, schedule.repeats = (
            HEALTH_REPAIR_FUNC,
            minutes,
            Schedule.MINUTES,
            -1,
        )
        schedule.save(update_fields=["func", "minutes", "schedule_type", "repeats"])
    return []
