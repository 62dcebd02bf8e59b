import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
application = get_wsgi_application()

from ragsite.security import refuse_insecure_start  # noqa: E402  (needs the settings loaded above)

refuse_insecure_start()
