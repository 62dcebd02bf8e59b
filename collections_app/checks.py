"""System checks with stable ids: `manage.py check` and every start-up run them."""

from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from django.db import DatabaseError, connections

from .store import schema_problem

HINT = "Install the ragsite version that wrote this store, or use a different DATABASE_URL."


def _schema_errors(aliases) -> list[Error]:
    errors = []
    for alias in aliases:
        problem = schema_problem(connections[alias])
        if problem is not None:
            errors.append(Error(problem, hint=HINT, id="collections.E001"))
    return errors


@register(Tags.database)
def check_store_schema(app_configs=None, databases=None, **kwargs):
    return _schema_errors(databases or [])


@register()
def check_store_schema_at_start(app_configs=None, databases=None, **kwargs):
    """The same check for a plain `manage.py check` and each command's start-up, which name no database.

    Opening the store is what the guard watches, so a refusal met while connecting is reported here
    as collections.E001 rather than raised. A store that cannot be reached at all is left to
    whatever needs it: that is not this check's question.
    """
    if databases is not None:
        return []  # check_store_schema answers for the databases named
    try:
        return _schema_errors(list(connections))
    except DatabaseError:
        return []


# --- Settings, range-checked at start-up -------------------------------------------------------

# Whole-number and number settings with the least value that works, and what goes wrong below it.
MINIMUMS = {
    "EMBED_TIMEOUT": (0.001, "seconds to wait for the embedder"),
    "JUDGE_TIMEOUT": (0.001, "seconds to wait for the judge"),
    "RERANK_TIMEOUT": (0.001, "seconds to wait for the reranker"),
    "RERANK_DEPTH": (1, "fused candidates sent to the reranker"),
    "EMBED_BATCH_SIZE": (1, "texts per embedding request"),
    "EMBED_CONCURRENCY": (1, "embedding requests in flight at once"),
    "IVF_MIN_PARAGRAPHS": (0, "paragraphs from which search takes the IVF path (0: never)"),
    "IVF_NPROBE": (0, "IVF lists a search probes (0: as many as the build measured for IVF_RECALL)"),
    "BUILD_HEARTBEAT_TIMEOUT": (1, "seconds of silence before a build counts as dead"),
    "MAX_UPLOAD_BYTES": (1, "bytes an uploaded document may have"),
    "HEALTH_REPAIR_MINUTES": (1, "minutes between scheduled health repairs"),
}


def _number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value == value  # NaN is not


@register()
def check_settings(app_configs=None, **kwargs):
    """collections.E002-E006, E008, E009: settings a search, build or ledger would misread, caught before
    the first request."""
    from ragsite.conf import settings

    from .limits import MAX_AROUND

    errors = []
    around = settings.AROUND
    if isinstance(around, bool) or not isinstance(around, int) or not 0 <= around <= MAX_AROUND:
        errors.append(
            Error(
                f"AROUND is {around!r}; it must be a whole number from 0 to {MAX_AROUND}",
                hint="AROUND is how many paragraphs either side of a hit come back with it (seed 000); 1 is "
                "the measured default, 0 returns the matching paragraph alone.",
                id="collections.E002",
            )
        )
    floor = settings.MIN_SCORE
    if not _number(floor) or not 0 <= floor <= 1:
        errors.append(
            Error(
                f"MIN_SCORE is {floor!r}; it must be a number from 0 to 1",
                hint="Scores are in [0, 1]: a floor above 1 returns nothing for every question, "
                "below 0 it is no floor. 0 turns the floor off; 0.22 is the default "
                '(docs/benchmarks.md, "The floor").',
                id="collections.E003",
            )
        )
    for name in ("EMBED_URL", "JUDGE_URL"):
        problem = url_problem(getattr(settings, name))
        if problem:
            errors.append(
                Error(
                    f"{name} {problem}",
                    hint="Give the endpoint's base URL, http or https, with or without its trailing /v1, "
                    "e.g. http://127.0.0.1:8080 or https://api.openai.com/v1.",
                    id="collections.E004",
                )
            )
    problem = url_problem(settings.RERANK_URL)
    if problem:
        errors.append(
            Error(
                f"RERANK_URL {problem}",
                hint="Give the reranking endpoint's full URL, http or https, e.g. "
                "http://127.0.0.1:8080/rerank (text-embeddings-inference) or https://api.jina.ai/v1/rerank.",
                id="collections.E004",
            )
        )
    if settings.EMBED_BACKEND == "http" and not (settings.EMBED_URL or "").strip():
        errors.append(
            Error(
                "EMBED_BACKEND is http but EMBED_URL is empty",
                hint="Set EMBED_URL to the embedding endpoint's base URL.",
                id="collections.E004",
            )
        )
    for name, (least, meaning) in MINIMUMS.items():
        value = getattr(settings, name)
        if not _number(value) or value < least:
            errors.append(
                Error(
                    f"{name} is {value!r}; it must be a number of at least {least:g} ({meaning})",
                    hint="See docs/configuration.md for what each setting means and its default.",
                    id="collections.E005",
                )
            )
    recall = settings.IVF_RECALL
    if not _number(recall) or not 0 < recall <= 1:
        errors.append(
            Error(
                f"IVF_RECALL is {recall!r}; it must be a number above 0 and at most 1",
                hint="The recall@10 against the exact scan an IVF build measures its nprobe for; 0.95 is "
                "the default.",
                id="collections.E005",
            )
        )
    errors += check_ocr()
    from .limits import MAX_ANSWER_CHARS, MIN_ANSWER_CHARS

    budget = settings.ANSWER_MAX_CHARS
    if not (
        _number(budget) and float(budget).is_integer() and MIN_ANSWER_CHARS <= budget <= MAX_ANSWER_CHARS
    ):
        errors.append(
            Error(
                f"ANSWER_MAX_CHARS is {budget!r}; it must be a whole number from {MIN_ANSWER_CHARS} to "
                f"{MAX_ANSWER_CHARS}",
                hint="The characters of text one search answer holds; 10000 is the default "
                "(docs/configuration.md).",
                id="collections.E008",
            )
        )
    from .conf import default_analyzer

    try:
        default_analyzer()
    except ImproperlyConfigured as exc:
        errors.append(
            Error(
                str(exc),
                hint="The analyzer new collections read words with; simple (seed 004's terms) is the default "
                "(docs/configuration.md, docs/collections.md).",
                id="collections.E009",
            )
        )
    problem = prices_problem(settings.MODEL_PRICES)
    if problem:
        errors.append(
            Error(
                f"MODEL_PRICES {problem}",
                hint='MODEL_PRICES is JSON: {"<model>": {"input": <price per 1,000 tokens>, "output": '
                "<price>}}, "
                "every price a number of at least 0.",
                id="collections.E006",
            )
        )
    return errors


def check_ocr() -> list:
    """collections.E007 for an OCR setting out of bounds; collections.W002 when OCR is on but Tesseract
    (or one of its languages) is missing here, so scans would be refused as "needs OCR (not installed)"."""
    from .conf import ocr_options
    from .text.ocr import NotInstalled, missing_languages

    try:
        options = ocr_options()
    except (ImproperlyConfigured, TypeError, ValueError) as exc:
        return [Error(str(exc), hint="See docs/configuration.md, OCR_*.", id="collections.E007")]
    if options is None:
        return []
    try:
        missing = missing_languages(options.languages)
    except NotInstalled as exc:
        problem = str(exc)
    else:
        problem = f"tesseract has no language pack for {', '.join(missing)}" if missing else ""
    if not problem:
        return []
    return [
        Warning(
            f"{problem}: scanned PDFs and images will be refused as needing OCR",
            hint="Install Debian's tesseract-ocr and tesseract-ocr-<language> (make run does where apt-get "
            "works), or set OCR_LANGUAGES to languages that are installed; empty turns OCR off.",
            id="collections.W002",
        )
    ]


def url_problem(value) -> str | None:
    """What is wrong with an endpoint URL setting, or None (an empty one means "not configured")."""
    from urllib.parse import urlsplit

    if value is None or value == "":
        return None
    if not isinstance(value, str):
        return f"is {type(value).__name__}, not a URL"
    shown = value[:80]
    if value != value.strip() or any(c.isspace() for c in value):
        return f"{shown!r} contains whitespace"
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - a port that is not a number raises here
    except ValueError as exc:
        return f"{shown!r} is not a URL ({exc})"
    if parts.scheme not in ("http", "https"):
        return f"{shown!r} is not an http or https URL"
    if not parts.hostname:
        return f"{shown!r} names no host"
    if parts.query or parts.fragment:
        return f"{shown!r} has a query or fragment; paths are appended to it, so it must end at the path"
    return None


def prices_problem(prices) -> str | None:
    """What is wrong with MODEL_PRICES, or None."""
    if not isinstance(prices, dict):
        return f"is {type(prices).__name__}, not a JSON object of models"
    for model, entry in prices.items():
        if not isinstance(entry, dict):
            return f'gives model "{str(model)[:80]}" {type(entry).__name__}, not an object of prices'
        for key, value in entry.items():
            if key not in ("input", "output"):
                return f'gives model "{str(model)[:80]}" an unknown price "{str(key)[:40]}" (input, output)'
            if not _number(value) or value < 0:
                return (
                    f'gives model "{str(model)[:80]}" {key} price {value!r}; '
                    "a price is a number of at least 0"
                )
    return None


@register(Tags.database)
def check_built_from(app_configs=None, databases=None, **kwargs):
    """collections.W001: collections written before built_from was checked that hold a path or address."""
    from .models import Collection, built_from_problem

    warnings = []
    for alias in databases or []:
        if schema_problem(connections[alias]) is not None:
            continue  # collections.E001 says why this store is not read
        try:
            rows = list(
                Collection.objects.using(alias)
                .exclude(built_from="")
                .values_list("agent__agent_id", "name", "built_from")
            )
        except DatabaseError:
            continue  # not migrated yet
        named = [f"{agent}/{name}" for agent, name, built_from in rows if built_from_problem(built_from)]
        if named:
            warnings.append(
                Warning(
                    f"{len(named)} collection(s) describe their documents by a path or address in "
                    f"built_from, which every build record and API answer repeats: {', '.join(named[:20])}",
                    hint='Edit them in the admin to say what the documents are, for people ("the HR share").',
                    id="collections.W001",
                )
            )
    return warnings


@register(Tags.security)
def check_secret_key(app_configs=None, **kwargs):
    """`ragsite.E001`: with DEBUG off, a missing or public SECRET_KEY stops the server from starting."""
    from django.conf import settings

    from ragsite.security import FIX, insecure_start_reason

    reason = insecure_start_reason(settings)
    if reason is None:
        return []
    return [
        Error(
            f"{reason} and DEBUG is off: anyone could forge signed data (django-q tasks run "
            "in the workers are signed with it)",
            hint=FIX,
            id="ragsite.E001",
        )
    ]


@register()
def check_folder_variables(app_configs=None, databases=None, **kwargs):
    """collections.W010: agent ids or collection names whose KNOWLEDGE_…_FOLDER variable is not theirs alone.

    Run at every start (no database named) and by `check --database default`. Such a variable is never
    read (services.knowledge.source_folder refuses it); this tells staff which names to change, and
    creation refuses new ones."""
    if databases is not None and "default" not in databases:
        return []
    from .services.knowledge import variable_collisions

    try:
        if schema_problem(connections["default"]) is not None:
            return []  # collections.E001 says why this store is not read
        found = variable_collisions()
    except DatabaseError:
        return []  # not reachable or not migrated yet
    return [
        Warning(
            problem,
            hint="Give one of them another id or name; until then those folder variables are not read.",
            id="collections.W010",
        )
        for problem in found
    ]
