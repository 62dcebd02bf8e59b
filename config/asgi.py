import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_asgi_application()

from ragsite.security import refuse_insecure_start  # noqa: E402  (needs the settings loaded above)

refuse_insecure_start()
