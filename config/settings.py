"""Settings for ragsite: the one place that reads the environment.

Every variable comes from the process environment or an optional `.env` beside
`manage.py`, through django-environ. Application code never reads `os.environ`;
it reads `django.conf.settings` lazily through each app's `conf.py`, so
`override_settings` works in tests. Every setting below is documented in
`docs/configuration.md` (a test fails when one is missing there).
"""

import os
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from ragsite.security import DEVELOPMENT_KEY

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)

# --- Django core -----------------------------------------------------------

DEBUG = env.bool("DEBUG", default=False)
# The fallback is public: with DEBUG off the server refuses to start with it
# (ragsite.security, check ragsite.E001); `make run` writes a random key into .env.
SECRET_KEY = env("SECRET_KEY", default="") or DEVELOPMENT_KEY
ALLOWED_HOSTS = env.list("ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[])
# The admin login `make run` (manage.py demo) ensures exists; an empty password is generated and printed once.
ADMIN_USER = env("ADMIN_USER", default="admin")
ADMIN_PASSWORD = env("ADMIN_PASSWORD", default="")

# Behind TLS (docs/security.md, "Production settings"): all off by default so the
# embedded default keeps working over plain http on 127.0.0.1.
SECURE_SSL_REDIRECT = env.bool("SECURE_SSL_REDIRECT", default=False)
SECURE_HSTS_SECONDS = env.int("SECURE_HSTS_SECONDS", default=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env.bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", default=False)
SECURE_HSTS_PRELOAD = env.bool("SECURE_HSTS_PRELOAD", default=False)
SESSION_COOKIE_SECURE = env.bool("SESSION_COOKIE_SECURE", default=False)
CSRF_COOKIE_SECURE = env.bool("CSRF_COOKIE_SECURE", default=False)
# "HTTP_X_FORWARDED_PROTO,https" when a proxy you trust terminates TLS and sets that header;
# never set it when clients can reach the server without passing through that proxy.
_proxy_ssl_header = env.list("SECURE_PROXY_SSL_HEADER", default=[])
if _proxy_ssl_header and len(_proxy_ssl_header) != 2:
    raise ImproperlyConfigured(
        'SECURE_PROXY_SSL_HEADER is "<header>,<value>", e.g. "HTTP_X_FORWARDED_PROTO,https"'
    )
SECURE_PROXY_SSL_HEADER = tuple(_proxy_ssl_header) or None

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    # Before staticfiles: runserver with DEBUG on leaves static files to whitenoise too,
    # so every mode serves them the same way.
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    # django-ninja's own static files: the API docs page uses its bundled Swagger UI, not a CDN.
    "ninja",
    "collections_app",
    "memory_app",
    # After the apps: collections_app's `qcluster` (stopping on a signal to its whole process group)
    # takes the place of django-q2's own, since the first app holding a command's name wins.
    "django_q",
]

MIDDLEWARE = [
    # Outermost of all: the request's id on every log line written while it is answered.
    "config.middleware.RequestId",
    # A span per request (OpenTelemetry, when configured): a search's and a queued build's spans join it.
    "config.middleware.RequestTrace",
    # Times and counts every request by its route pattern, whatever answered it.
    "config.metrics.RequestMetrics",
    # Outermost but one, so it also sees the CSRF page and any other HTML error answered below it.
    "config.middleware.JsonErrors",
    # Row-level security on PostgreSQL: an agent's request sees only that agent's rows (ragsite.rls).
    "config.middleware.AgentScope",
    "django.middleware.security.SecurityMiddleware",
    # Static files (the admin's CSS and JS, Swagger UI) from the web process itself, with
    # DEBUG off, under runserver, uvicorn and gunicorn alike; no separate web server needed.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# --- Store -----------------------------------------------------------------

DATA_DIR = Path(env("DATA_DIR", default=str(BASE_DIR / "data")))
DATABASES = {"default": env.db("DATABASE_URL", default=f"sqlite:///{DATA_DIR / 'ragsite.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # SQLite creates the file but not its folder; a fresh clone has no data/ yet.
    Path(DATABASES["default"]["NAME"]).parent.mkdir(parents=True, exist_ok=True)
    DATA_DIR.mkdir(parents=True, exist_ok=True)
    # WAL lets readers keep answering while a build writes; IMMEDIATE takes the
    # write lock at BEGIN so two writers queue on the busy timeout instead of
    # failing half way with "database is locked". 32 KB pages (set before WAL, so
    # they take on a new store only): a paragraph row (text + float16 vector) is
    # about 2.4 KB, so 4 KB pages held one row and wasted the rest — 2.1 KB a
    # paragraph beyond its text at 100k, 1.07 KB with 32 KB pages (docs/decisions/0002).
    DATABASES["default"]["OPTIONS"] = {
        "init_command": (
            "PRAGMA page_size=32768; PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
            "PRAGMA foreign_keys=ON;"
        ),
        "transaction_mode": "IMMEDIATE",
        "timeout": env.int("SQLITE_BUSY_TIMEOUT", default=20),
    }
    DATABASES["default"]["TEST"] = {"NAME": str(DATA_DIR / "test-ragsite.sqlite3")}
else:
    # A server's connection is kept between requests (a minute; checked before reuse) rather than
    # opened and closed around each one: on PostgreSQL a new connection (and its row-level-security
    # check, `ragsite.rls.installed`) is most of a warm recall's cost beside the model
    # (docs/decisions/0013). A URL's own `?conn_max_age=` wins.
    DATABASES["default"].setdefault("CONN_MAX_AGE", 60)
    DATABASES["default"].setdefault("CONN_HEALTH_CHECKS", True)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Task queue (django-q2) ------------------------------------------------

REDIS_URL = env("REDIS_URL", default="")
Q_WORKERS = env.int("Q_WORKERS", default=2)
Q_CLUSTER = {
    "name": "ragsite",
    "workers": Q_WORKERS,
    "timeout": env.int("Q_TIMEOUT", default=3600),
    "retry": env.int("Q_TIMEOUT", default=3600) + 60,
    "max_attempts": 1,
    "catch_up": False,
    "poll": 0.5,
    "sync": env.bool("Q_SYNC", default=False),
    "label": "Task queue",
}
if REDIS_URL:
    Q_CLUSTER["redis"] = REDIS_URL
else:
    Q_CLUSTER["orm"] = "default"
    # Clusters publish a heartbeat (their status, every half second, expiring after 3 s)
    # to this cache; the web process reads it to tell a user that no worker is running.
    # A per-process memory cache would hide it, so it is a folder both processes see.
    # (With REDIS_URL the heartbeat goes to Redis, which every machine sees.)
    Q_CLUSTER["cache"] = "task_cluster"
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "task_cluster": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(DATA_DIR / "task-cluster"),
    },
}

# --- Embedding, judge and search -------------------------------------------

EMBED_BACKEND = env("EMBED_BACKEND", default="local")
EMBED_MODEL_DIR = env("EMBED_MODEL_DIR", default="")
# The local model's laid-out weights, written once and mapped read-only by every worker; empty keeps
# a private copy per process.
EMBED_CACHE_DIR = env("EMBED_CACHE_DIR", default=str(DATA_DIR / "model-cache"))
EMBED_URL = env("EMBED_URL", default="")
EMBED_MODEL = env("EMBED_MODEL", default="")
EMBED_API_KEY = env("EMBED_API_KEY", default="")
EMBED_TIMEOUT = env.float("EMBED_TIMEOUT", default=30.0)
EMBED_BATCH_SIZE = env.int("EMBED_BATCH_SIZE", default=64)
EMBED_CONCURRENCY = env.int("EMBED_CONCURRENCY", default=4)
# What one request to this server's own /v1/embeddings may ask (collections_app.embedding_server):
# as many texts as a build's batch, each as long as a memory record.
EMBED_SERVER_MAX_INPUTS = env.int("EMBED_SERVER_MAX_INPUTS", default=64)
EMBED_SERVER_MAX_CHARS = env.int("EMBED_SERVER_MAX_CHARS", default=16000)

JUDGE_URL = env("JUDGE_URL", default="")
JUDGE_MODEL = env("JUDGE_MODEL", default="")
JUDGE_API_KEY = env("JUDGE_API_KEY", default="")
JUDGE_TIMEOUT = env.float("JUDGE_TIMEOUT", default=20.0)
# The optional reranker: a Cohere/Jina/TEI-compatible /rerank endpoint (collections_app/rerank.py).
RERANK_URL = env("RERANK_URL", default="")
RERANK_MODEL = env("RERANK_MODEL", default="")
RERANK_API_KEY = env("RERANK_API_KEY", default="")
RERANK_TIMEOUT = env.float("RERANK_TIMEOUT", default=10.0)
RERANK_DEPTH = env.int("RERANK_DEPTH", default=30)

MIN_SCORE = env.float("MIN_SCORE", default=0.22)
AROUND = env.int("AROUND", default=1)
# The analyzer a new collection's keyword leg reads words with (ragsite/analyzers.py): simple, cjk, english, …
ANALYZER = env("ANALYZER", default="simple")
IVF_MIN_PARAGRAPHS = env.int("IVF_MIN_PARAGRAPHS", default=50000)
IVF_NPROBE = env.int("IVF_NPROBE", default=0)
IVF_RECALL = env.float("IVF_RECALL", default=0.95)
# Each build's search index (memory-mapped by every search process); rebuilt from the store when missing.
INDEX_DIR = Path(env("INDEX_DIR", default=str(DATA_DIR / "indexes")))
# A node without a build's index fetches it from the store (services.indexes.store): inside the search for
# a build of at most INDEX_LOAD_INLINE_ROWS paragraphs, else in the background while searches of that
# collection wait at most INDEX_LOAD_WAIT seconds and then answer 503 index_loading with Retry-After.
INDEX_LOAD_INLINE_ROWS = env.int("INDEX_LOAD_INLINE_ROWS", default=20000)
INDEX_LOAD_WAIT = env.float("INDEX_LOAD_WAIT", default=2.0)

# Processes that tokenize a large collection's rows while its index is written (1: in the writing one;
# more help only where a core is free while a build runs, docs/decisions/0051).
INDEX_WRITE_PROCESSES = env.int("INDEX_WRITE_PROCESSES", default=1)
MODEL_PRICES = env.json("MODEL_PRICES", default={})
# The currency MODEL_PRICES is written in, and so the ledger's costs and agents' daily budgets: a label.
LEDGER_CURRENCY = env("LEDGER_CURRENCY", default="USD")
# Known answers (docs/measure.md): the share of answers a measured floor keeps when answers and
# controls do not separate, and the gate — unset: off; N: refuse a build that loses more than N.
MEASURED_FLOOR_KEEP = env.float("MEASURED_FLOOR_KEEP", default=0.95)
KNOWN_ANSWERS_GATE = env.int("KNOWN_ANSWERS_GATE", default=None)

# KNOWLEDGE_ROOT holds one folder per agent, whose sub-folders are that agent's
# possible sources. Web process and task cluster read the same .env, so both see it.
KNOWLEDGE_ROOT = env("KNOWLEDGE_ROOT", default=str(DATA_DIR / "knowledge"))
# KNOWLEDGE_[<AGENT>__]<COLLECTION>_FOLDER overrides are read by name when a build runs
# (collections_app.conf.folder_from_variable); they are deliberately not copied here
# so that no path is ever listed with the rest of the settings.

BUILD_HEARTBEAT_TIMEOUT = env.int("BUILD_HEARTBEAT_TIMEOUT", default=300)
# Folder sync: a sync build that failed for a reason that may pass is asked again this many times, the
# first after SYNC_RETRY_SECONDS and each later one after twice the wait before it.
SYNC_RETRY_LIMIT = env.int("SYNC_RETRY_LIMIT", default=5)
SYNC_RETRY_SECONDS = env.int("SYNC_RETRY_SECONDS", default=60)
# A folder file is read only once its size and modification time have stood still this long.
SYNC_SETTLE_SECONDS = env.float("SYNC_SETTLE_SECONDS", default=5.0)
# Minutes between checks of a new folder collection's folder (services.sync); 0: built only when asked.
SYNC_EVERY = env.int("SYNC_EVERY", default=5)
# Remote sources (docs/sources.md): the hosts a collection's s3 or git source may reach (host names, IP
# addresses or networks, comma-separated; empty = loopback only), and what one listing may hold and take.
SOURCE_ALLOWED_HOSTS = env.list("SOURCE_ALLOWED_HOSTS", default=[])
SOURCE_MAX_DOCUMENTS = env.int("SOURCE_MAX_DOCUMENTS", default=10000)
SOURCE_TIMEOUT = env.float("SOURCE_TIMEOUT", default=60.0)
SOURCE_CACHE_DIR = env("SOURCE_CACHE_DIR", default=str(DATA_DIR / "sources"))
# Per document, in a child process (collections_app.text.bounded): wall-clock seconds and address space.
EXTRACT_TIMEOUT = env.float("EXTRACT_TIMEOUT", default=120.0)
EXTRACT_MEMORY_MB = env.int("EXTRACT_MEMORY_MB", default=1024)
# OCR of scanned PDF pages and images (collections_app.text.ocr), in that child too. Empty languages: off.
# Characters of paragraph text one search answer holds at most, unless the request says (max_chars).
ANSWER_MAX_CHARS = env.int("ANSWER_MAX_CHARS", default=10000)
# Index a list's, a table's or a Q/A run's entries too (collections_app.text.entries), so a paragraph is
# scored by its best entry as well as itself; on: the man shelf gains and no set loses (docs/decisions/0098).
ENTRIES = env.bool("ENTRIES", default=True)
OCR_LANGUAGES = env("OCR_LANGUAGES", default="eng")
OCR_MAX_PAGES = env.int("OCR_MAX_PAGES", default=50)
OCR_PAGE_SECONDS = env.float("OCR_PAGE_SECONDS", default=30.0)
OCR_MAX_PIXELS = env.int("OCR_MAX_PIXELS", default=12_000_000)
OCR_DPI = env.int("OCR_DPI", default=300)
# A build queued this long while no task worker reports a heartbeat is shown as waiting for one.
BUILD_STALE_SECONDS = env.int("BUILD_STALE_SECONDS", default=60)
MAX_UPLOAD_BYTES = env.int("MAX_UPLOAD_BYTES", default=50 * 1024 * 1024)
HEALTH_REPAIR_MINUTES = env.int("HEALTH_REPAIR_MINUTES", default=15)
# The characters a memory recall answers when the caller gives no max_chars (docs/memory.md).
MEMORY_RECALL_MAX_CHARS = env.int("MEMORY_RECALL_MAX_CHARS", default=4000)
# The analyzer memory recall's keyword leg reads words with (ragsite/analyzers.py), the names ANALYZER takes.
MEMORY_ANALYZER = env("MEMORY_ANALYZER", default="simple")
# Webhooks (docs/webhooks.md): a URL whose host resolves to a loopback, private, link-local or other
# non-public address is refused unless this is on (a deployment whose receivers are on its own network).
WEBHOOK_ALLOW_PRIVATE = env.bool("WEBHOOK_ALLOW_PRIVATE", default=False)
# Seconds one delivery attempt may take in all: connecting, sending and the whole answer.
WEBHOOK_TIMEOUT = env.float("WEBHOOK_TIMEOUT", default=10.0)
# Deliveries run on a task queue of their own, served by `Q_CLUSTER_NAME=<WEBHOOK_QUEUE> manage.py
# qcluster` with WEBHOOK_WORKERS workers, so a slow receiver never holds a build's worker. Empty: the
# main cluster sends them (one process fewer, at that cost).
WEBHOOK_QUEUE = env("WEBHOOK_QUEUE", default="ragsite-webhooks")
WEBHOOK_WORKERS = env.int("WEBHOOK_WORKERS", default=1)
# Fernet keys sealing webhook secrets at rest, the first sealing (collections_app/sealed.py); empty:
# one derived from SECRET_KEY.
WEBHOOK_SECRET_KEYS = env("WEBHOOK_SECRET_KEYS", default="")
if WEBHOOK_QUEUE:
    # The webhook cluster's own bounds: a task past the attempt's deadline (plus a minute for name
    # look-ups) is killed, so the sweep knows a "sending" delivery older than that is not live.
    Q_CLUSTER["ALT_CLUSTERS"] = {
        WEBHOOK_QUEUE: {
            "workers": WEBHOOK_WORKERS,
            "timeout": int(WEBHOOK_TIMEOUT) + 60,
            "retry": int(WEBHOOK_TIMEOUT) + 120,
        }
    }

# The read audit (docs/operations.md): the question as asked ("text"), its SHA-256 only ("hash") or
# nothing ("off"); and the days an entry is kept before the hourly purge deletes it (0: forever).
AUDIT_QUESTIONS = env("AUDIT_QUESTIONS", default="hash")
AUDIT_RETENTION_DAYS = env.int("AUDIT_RETENTION_DAYS", default=365)
# Where a read's entry waits (fsynced) while SQLite's write lock is held by another process.
AUDIT_SPOOL_DIR = Path(env("AUDIT_SPOOL_DIR", default=str(DATA_DIR / "audit-spool")))

# --- Staff sign-in through the organisation's OpenID Connect provider (docs/operations.md) ----

# The provider's discovery document (`…/.well-known/openid-configuration`); empty: SSO off.
OIDC_DISCOVERY_URL = env("OIDC_DISCOVERY_URL", default="")
OIDC_CLIENT_ID = env("OIDC_CLIENT_ID", default="")
OIDC_CLIENT_SECRET = env("OIDC_CLIENT_SECRET", default="")
OIDC_SCOPES = env("OIDC_SCOPES", default="openid email profile groups")
# The ID-token claim listing the person's groups, and which groups make staff and superusers.
OIDC_GROUPS_CLAIM = env("OIDC_GROUPS_CLAIM", default="groups")
OIDC_STAFF_GROUPS = env.list("OIDC_STAFF_GROUPS", default=[])
OIDC_SUPERUSER_GROUPS = env.list("OIDC_SUPERUSER_GROUPS", default=[])
# IdP group -> Django group (whose permissions the admin grants), e.g. {"librarians": "Librarians"}.
OIDC_GROUPS_MAP = env.json("OIDC_GROUPS_MAP", default={})
OIDC_PROVIDER_NAME = env("OIDC_PROVIDER_NAME", default="your organisation's account")
OIDC_TIMEOUT = env.float("OIDC_TIMEOUT", default=10.0)
# The admin's username-and-password form; off: the provider is the only way in.
PASSWORD_LOGIN = env.bool("PASSWORD_LOGIN", default=True)
# Readers named by a signed token of the provider (`readerToken`): whose discovery document (empty:
# OIDC_DISCOVERY_URL's), which audiences its tokens may carry (empty: OIDC_CLIENT_ID), and whether
# a reader named in plain text is still taken.
READER_TOKEN_DISCOVERY_URL = env("READER_TOKEN_DISCOVERY_URL", default="")
READER_TOKEN_AUDIENCES = env.list("READER_TOKEN_AUDIENCES", default=[])
READER_PLAIN = env.bool("READER_PLAIN", default=True)
# SCIM 2.0 provisioning (/scim/v2/, docs/operations.md): the identity provider's bearer token (empty:
# provisioning is off), and the reader id a provisioned person reads as, from its userName and
# externalId (e.g. "{externalId}@idp.example.org", so it is the reader its reader tokens name).
SCIM_TOKEN = env("SCIM_TOKEN", default="")
SCIM_READER_ID = env("SCIM_READER_ID", default="{userName}")

# --- Traces (OpenTelemetry, docs/operations.md) ----------------------------------

# An OTLP/HTTP collector's base URL (spans go to <it>/v1/traces); empty: no spans are recorded.
OTEL_EXPORTER_OTLP_ENDPOINT = env("OTEL_EXPORTER_OTLP_ENDPOINT", default="")
OTEL_SERVICE_NAME = env("OTEL_SERVICE_NAME", default="ragsite")

# --- Metrics (GET /metrics, docs/operations.md) -------------------------------

# A scrape must carry `Authorization: Bearer <token>`; empty: only loopback clients may scrape.
METRICS_TOKEN = env("METRICS_TOKEN", default="")
# prometheus-client's multiprocess mode: each process (gunicorn's workers, the task cluster's) writes
# its values here and a scrape sums them. prometheus-client reads the variable from the environment
# when first imported, so it is put there (from .env too) before any app loads. Empty: one process.
PROMETHEUS_MULTIPROC_DIR = env("PROMETHEUS_MULTIPROC_DIR", default="")
if PROMETHEUS_MULTIPROC_DIR:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = PROMETHEUS_MULTIPROC_DIR
    Path(PROMETHEUS_MULTIPROC_DIR).mkdir(parents=True, exist_ok=True)

# --- Files, static, i18n ---------------------------------------------------

MEDIA_ROOT = Path(env("MEDIA_ROOT", default=str(BASE_DIR / "media")))
MEDIA_URL = "/media/"
STATIC_URL = "/static/"
STATIC_ROOT = Path(env("STATIC_ROOT", default=str(DATA_DIR / "static")))
# Serve straight from the apps' static folders, so no `collectstatic` step is needed
# before `make run`, uvicorn or gunicorn; files collected into STATIC_ROOT are served too.
WHITENOISE_USE_FINDERS = True
try:
    STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every start when it is missing
except OSError:
    pass

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# --- Web tier (gunicorn -c python:config.gunicorn_conf) ----------------------

# Preforked workers (each a process forked from a warmed master, see config/prefork.py), the
# threads each one serves requests with (a build_status wait holds one for up to a minute), and
# the address the master listens on.
WEB_CONCURRENCY = env.int("WEB_CONCURRENCY", default=4)
WEB_THREADS = env.int("WEB_THREADS", default=4)
WEB_BIND = env("WEB_BIND", default="127.0.0.1:8000")

# --- Logging ---------------------------------------------------------------

LOG_LEVEL = env("LOG_LEVEL", default="INFO")
# "plain" lines for a terminal, or "json": one JSON object a line with the request's id.
LOG_FORMAT = env("LOG_FORMAT", default="plain")
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f'LOG_FORMAT is "plain" or "json", not {LOG_FORMAT!r}')
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Tracebacks (an admin PermissionDenied, a 500) name files: the installation's folders become
    # placeholders (ragsite.logs.WithoutInstallPaths, and JsonLines after it), so no deployment path
    # reaches the log.
    "formatters": {
        "plain": {
            "class": "ragsite.logs.WithoutInstallPaths",
            "format": "%(asctime)s %(levelname)s %(name)s %(message)s",
        },
        "json": {"()": "ragsite.logs.JsonLines"},
    },
    # Upstream URLs (httpx logs each request at INFO) lose userinfo and query: ragsite.logs.
    "filters": {
        "redact_urls": {"()": "ragsite.logs.RedactUpstreamURLs"},
        "task_cluster_routine": {"()": "ragsite.logs.TaskClusterRoutine"},
        "request_id": {"()": "ragsite.logs.WithRequestId"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["redact_urls", "request_id"],
        }
    },
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    # django-q2 logs as "django-q"; its routine lines (schedules, tasks processed) are DEBUG here.
    "loggers": {"django-q": {"level": LOG_LEVEL, "filters": ["task_cluster_routine"]}},
}
