"""The collections' domain refusals and the error codes a search answers with, declared once.

Every refusal is a `ragsite.errors.RagsiteError`, so the API, MCP and the commands turn it into the
one error shape without knowing where it came from.
"""

from ragsite.errors import RagsiteError

# The codes of a refused search request (HTTP 400 unless the raising site says otherwise).
INVALID_QUESTION = "invalid_question"
INVALID_MOST = "invalid_most"
INVALID_AROUND = "invalid_around"
INVALID_MAX_CHARS = "invalid_max_chars"
INVALID_MIN_SCORE = "invalid_min_score"
INVALID_MODE = "invalid_mode"
INVALID_NPROBE = "invalid_nprobe"
INVALID_FILTERS = "invalid_filters"  # services.search.filtering: a filter outside its shape or bounds
UNKNOWN_COLLECTION = "unknown_collection"
UNKNOWN_AGENT = "unknown_agent"
NOT_ALLOWED_FOR_AGENT = "not_allowed_for_agent"
NOT_BUILT = "not_built"
NO_VECTORS = "no_vectors"
MODEL_MISMATCH = "model_mismatch"
WIDTH_MISMATCH = "width_mismatch"
EMBEDDER_UNAVAILABLE = "embedder_unavailable"


class BuildRefused(RagsiteError):
    """A build refused before its swap: it is recorded as refused and the old paragraphs keep answering."""

    code = "build_refused"
    status = 409


class EmptyBuild(BuildRefused):
    """A build would leave the collection with no paragraphs; the old ones keep answering."""

    code = "empty_build"


class KnownAnswersLost(BuildRefused):
    """KNOWN_ANSWERS_GATE refused a build: it loses more known answers than the gate allows."""

    code = "known_answers_lost"


class InvalidKnownAnswers(RagsiteError):
    """A set of known answers that cannot be stored (too many, malformed, a question twice)."""

    code = "invalid_known_answers"
    status = 400
