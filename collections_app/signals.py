from django.db import transaction
from django.db.backends.signals import connection_created
from django.db.models.signals import post_delete

from .models import SCHEMA_VERSION, Document, StoreMeta
from .store import guard_on_connect

connection_created.connect(guard_on_connect, dispatch_uid="ragsite_store_guard")


def remove_uploaded_file(sender, instance: Document, **kwargs) -> None:
    """An uploaded document's file goes with its row, once the deletion has committed."""
    if instance.upload:
        storage, name = instance.upload.storage, instance.upload.name
        transaction.on_commit(lambda: storage.delete(name))


post_delete.connect(remove_uploaded_file, sender=Document, dispatch_uid="ragsite_remove_uploaded_file")


def record_schema_version(sender, using="default", **kwargs) -> None:
    """After every `migrate` (and `flush`, which empties store_meta), the store records its version.

    Only a missing row is written: a store already recording another version keeps it, so the guard
    still refuses a newer store. Without this, a flushed store (every transactional test, or an
    operator's `flush`) would look like one whose writer is unknown and be refused on the next open.
    """
    StoreMeta.objects.using(using).get_or_create(
        key="schema_version", defaults={"value": str(SCHEMA_VERSION)}
    )
