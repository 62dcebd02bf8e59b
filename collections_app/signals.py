from django.db import transaction
from django.db.backends.signals import connection_created
from django.db.models.signals import post_delete

from .models import Document
from .store import guard_on_connect

connection_created.connect(guard_on_connect, dispatch_uid="ragsite_store_guard")


def remove_uploaded_file(sender, instance: Document, **kwargs) -> None:
    """An uploaded document's file goes with its row, once the deletion has committed."""
    if instance.upload:
        storage, name = instance.upload.storage, instance.upload.name
        transaction.on_commit(lambda: storage.delete(name))


post_delete.connect(remove_uploaded_file, sender=Document, dispatch_uid="ragsite_remove_uploaded_file")
