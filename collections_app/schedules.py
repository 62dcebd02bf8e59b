"""The django-q2 schedule collections need: the sweep that fails builds whose worker died.

Without it a dead worker's build stayed "running" until somebody asked for another build
(D16 of the 2026-12-01 review). `ensure_schedules` runs after every `migrate` (a post_migrate
receiver) and from `manage.py setup_schedules`, like memory's health repair.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS

SWEEP_STALE_BUILDS = "collections: fail builds whose worker died"
SWEEP_STALE_BUILDS_FUNC = "collections_app.tasks.sweep_stale_builds"
# The smallest interval django-q2 schedules; a dead build is failed within
# BUILD_HEARTBEAT_TIMEOUT plus at most this (and the scheduler's 30 s poll).
SWEEP_MINUTES = 1


def ensure_schedules(using: str = DEFAULT_DB_ALIAS) -> list[str]:
    """Create or update the sweep's schedule; returns the names created (not those updated)."""
    from django_q.models import Schedule

    existing = Schedule.objects.using(using).filter(name=SWEEP_STALE_BUILDS).order_by("pk")
    schedule = existing.first()
    if schedule is None:
        Schedule.objects.using(using).create(
            name=SWEEP_STALE_BUILDS, func=SWEEP_STALE_BUILDS_FUNC, schedule_type=Schedule.MINUTES,
            minutes=SWEEP_MINUTES, repeats=-1,
        )
        return [SWEEP_STALE_BUILDS]
    existing.exclude(pk=schedule.pk).delete()
    wanted = (SWEEP_STALE_BUILDS_FUNC, SWEEP_MINUTES, Schedule.MINUTES, -1)
    if (schedule.func, schedule.minutes, schedule.schedule_type, schedule.repeats) != wanted:
        schedule.func, schedule.minutes, schedule.schedule_type, schedule.repeats = wanted
        schedule.save(update_fields=["func", "minutes", "schedule_type", "repeats"])
    return []


def after_migrate(sender, using=DEFAULT_DB_ALIAS, **kwargs) -> None:
    """Connected for collections_app only, so it runs once per migrate."""
    from django.db import connections

    if "django_q_schedule" in connections[using].introspection.table_names():
        ensure_schedules(using)
