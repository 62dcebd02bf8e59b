"""post_migrate: after every migrate, recreate missing record-node triggers and the schedules.

post_save / post_delete of a record: its agent's recall generation moves on (the admin, the
services and a cascade all pass through them), so every process rebuilds its cached recall index.
"""

import logging

from django.db import connections

from .checks import expected_triggers, trigger_faults, triggers_expected
from .schedules import ensure_schedules
from .triggers import SUPPORTED_VENDORS, ensure_triggers, replace_triggers

logger = logging.getLogger("memory_app")


def after_migrate(sender, using="default", **kwargs) -> None:
    """Connected for memory_app only, so it runs once per migrate."""
    connection = connections[using]
    if connection.vendor in SUPPORTED_VENDORS and triggers_expected(connection):
        created = ensure_triggers(connection)
        if created:
            logger.warning("recreated missing record-node triggers: %s", ", ".join(created))
        # A trigger of the right name that does something else is replaced, not trusted by its name.
        faulty = sorted(
            {fault.trigger for fault in trigger_faults(connection, expected_triggers(connection))}
        )
        if faulty:
            replace_triggers(connection, faulty)
            logger.warning("replaced record-node triggers that did not do their work: %s", ", ".join(faulty))
    if "django_q_schedule" in connection.introspection.table_names():
        ensure_schedules(using)


def record_saved(sender, instance, **kwargs) -> None:
    from .services.common import raise_generation

    raise_generation(instance.agent_id, changed=[(instance.KIND, instance.pk)])


def record_deleted(sender, instance, **kwargs) -> None:
    from .models import NodePassages
    from .services.common import raise_generation

    # The triggers delete the record's nodes; their passages go with the record here.
    NodePassages.objects.filter(parent_kind=instance.KIND, parent_id=instance.pk).delete()

    raise_generation(instance.agent_id, create=False, changed=[(instance.KIND, instance.pk)])
