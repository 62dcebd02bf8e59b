"""The django-q2 schedules collections need, each one periodic sweep over every collection.

- the sweep that fails builds whose worker died (without it a dead worker's build stayed "running"
  until somebody asked for another build: docs/decisions/0019);
- the sync sweep, which queues a check of every synced collection that is due (services.sync);
- the webhook sweep, which sends again the deliveries whose backoff has passed (services.webhooks);
- the read audit's purge, hourly, of the entries past AUDIT_RETENTION_DAYS (services.audit).

One sweep per concern rather than one schedule per collection or per delivery: the schedule table
stays three rows however many collections sync, and a collection's period is a column people edit
without touching django-q (docs/decisions/0040). `ensure_schedules` runs after every `migrate` (a
post_migrate receiver) and from `manage.py setup_schedules`, like memory's health repair.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS

SWEEP_STALE_BUILDS = "collections: fail builds whose worker died"
SWEEP_STALE_BUILDS_FUNC = "collections_app.tasks.sweep_stale_builds"
SWEEP_SYNC = "collections: check synced folders that are due"
SWEEP_SYNC_FUNC = "collections_app.tasks.sweep_sync"
SWEEP_WEBHOOKS = "collections: send webhook deliveries due a retry"
SWEEP_WEBHOOKS_FUNC = "collections_app.tasks.sweep_webhooks"
# The smallest interval django-q2 schedules; a dead build is failed within
# BUILD_HEARTBEAT_TIMEOUT plus at most this (and the scheduler's 30 s poll).
SWEEP_MINUTES = 1
PURGE_READ_AUDIT = "collections: purge read-audit entries past their retention"
PURGE_READ_AUDIT_FUNC = "collections_app.tasks.purge_read_audit"
PURGE_MINUTES = 60

# (name, task, minutes between runs)
SCHEDULES = (
    (SWEEP_STALE_BUILDS, SWEEP_STALE_BUILDS_FUNC, SWEEP_MINUTES),
    (SWEEP_SYNC, SWEEP_SYNC_FUNC, SWEEP_MINUTES),
    (SWEEP_WEBHOOKS, SWEEP_WEBHOOKS_FUNC, SWEEP_MINUTES),
    (PURGE_READ_AUDIT, PURGE_READ_AUDIT_FUNC, PURGE_MINUTES),
)


def ensure_schedules(using: str = DEFAULT_DB_ALIAS) -> list[str]:
    """Create or update the sweeps' schedules; returns the names created (not those updated)."""
    from django_q.models import Schedule

    created = []
    for name, func, minutes in SCHEDULES:
        existing = Schedule.objects.using(using).filter(name=name).order_by("pk")
        schedule = existing.first()
        if schedule is None:
            Schedule.objects.using(using).create(
                name=name,
                func=func,
                schedule_type=Schedule.MINUTES,
                minutes=minutes,
                repeats=-1,
            )
            created.append(name)
            continue
        existing.exclude(pk=schedule.pk).delete()
        wanted = (func, minutes, Schedule.MINUTES, -1)
        if (schedule.func, schedule.minutes, schedule.schedule_type, schedule.repeats) != wanted:
            schedule.func, schedule.minutes, schedule.schedule_type, schedule.repeats = wanted
            schedule.save(update_fields=["func", "minutes", "schedule_type", "repeats"])
    return created


def after_migrate(sender, using=DEFAULT_DB_ALIAS, **kwargs) -> None:
    """Connected for collections_app only, so it runs once per migrate."""
    from django.db import connections

    if "django_q_schedule" in connections[using].introspection.table_names():
        ensure_schedules(using)
