from django.db.backends.signals import connection_created

from .store import guard_on_connect

connection_created.connect(guard_on_connect, dispatch_uid="ragsite_store_guard")
