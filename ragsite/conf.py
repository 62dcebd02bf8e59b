"""Lazy access to ragsite's settings, in one place.

Nothing here reads a setting at import time: each attribute is looked up on `django.conf.settings`
when it is used, so `override_settings` in tests and a changed environment in a new process both
take effect. The defaults are declared once, in config/settings.py.
"""

from django.conf import settings as django_settings

# The settings the apps read through here.
_NAMES = frozenset(
    {
        "EMBED_BACKEND",
        "EMBED_MODEL_DIR",
        "EMBED_URL",
        "EMBED_MODEL",
        "EMBED_API_KEY",
        "EMBED_TIMEOUT",
        "EMBED_BATCH_SIZE",
        "EMBED_CONCURRENCY",
        "EMBED_CACHE_DIR",
        "JUDGE_URL",
        "JUDGE_MODEL",
        "JUDGE_API_KEY",
        "JUDGE_TIMEOUT",
        "MIN_SCORE",
        "AROUND",
        "ANALYZER",
        "MODEL_PRICES",
        "LEDGER_CURRENCY",
        "BUILD_HEARTBEAT_TIMEOUT",
        "SYNC_RETRY_LIMIT",
        "SYNC_RETRY_SECONDS",
        "SYNC_SETTLE_SECONDS",
        "SOURCE_ALLOWED_HOSTS",
        "SOURCE_MAX_DOCUMENTS",
        "SOURCE_TIMEOUT",
        "SOURCE_CACHE_DIR",
        "SYNC_EVERY",
        "MAX_UPLOAD_BYTES",
        "HEALTH_REPAIR_MINUTES",
        "MEMORY_RECALL_MAX_CHARS",
        "MEMORY_ANALYZER",
        "IVF_MIN_PARAGRAPHS",
        "IVF_NPROBE",
        "IVF_RECALL",
        "MEASURED_FLOOR_KEEP",
        "KNOWN_ANSWERS_GATE",
        "INDEX_DIR",
        "INDEX_LOAD_INLINE_ROWS",
        "INDEX_LOAD_WAIT",
        "INDEX_WRITE_PROCESSES",
        "RERANK_URL",
        "RERANK_MODEL",
        "RERANK_API_KEY",
        "RERANK_TIMEOUT",
        "RERANK_DEPTH",
        "EXTRACT_TIMEOUT",
        "EXTRACT_MEMORY_MB",
        "EMBED_SERVER_MAX_INPUTS",
        "ANSWER_MAX_CHARS",
        "ENTRIES",
        "OCR_LANGUAGES",
        "OCR_MAX_PAGES",
        "OCR_PAGE_SECONDS",
        "OCR_MAX_PIXELS",
        "OCR_DPI",
        "EMBED_SERVER_MAX_CHARS",
        "KNOWLEDGE_ROOT",
        "BUILD_STALE_SECONDS",
        "ADMIN_USER",
        "ADMIN_PASSWORD",
        "WEB_CONCURRENCY",
        "WEB_THREADS",
        "WEB_BIND",
        "WEBHOOK_ALLOW_PRIVATE",
        "WEBHOOK_TIMEOUT",
        "AUDIT_QUESTIONS",
        "AUDIT_RETENTION_DAYS",
        "AUDIT_SPOOL_DIR",
        "OIDC_DISCOVERY_URL",
        "OIDC_CLIENT_ID",
        "OIDC_CLIENT_SECRET",
        "OIDC_SCOPES",
        "OIDC_GROUPS_CLAIM",
        "OIDC_STAFF_GROUPS",
        "OIDC_SUPERUSER_GROUPS",
        "OIDC_GROUPS_MAP",
        "OIDC_PROVIDER_NAME",
        "OIDC_TIMEOUT",
        "PASSWORD_LOGIN",
        "READER_TOKEN_DISCOVERY_URL",
        "READER_TOKEN_AUDIENCES",
        "READER_PLAIN",
        "SCIM_TOKEN",
        "SCIM_READER_ID",
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_SERVICE_NAME",
        "WEBHOOK_QUEUE",
        "WEBHOOK_WORKERS",
        "WEBHOOK_SECRET_KEYS",
        "Q_CLUSTER",
    }
)


class AppSettings:
    def __getattr__(self, name):
        if name not in _NAMES:
            raise AttributeError(name)
        return getattr(django_settings, name)


settings = AppSettings()
