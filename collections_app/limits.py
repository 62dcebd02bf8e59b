"""The limits of a search request (and of a sync's period), declared once: the API's schema, the MCP
tool's input schema, the admin's forms, the checks and the services all read them from here."""

MAX_QUESTION_CHARS = 2000
MAX_MOST = 50
# Paragraphs either side of a hit, at most: for a request, a collection's override and AROUND.
MAX_AROUND = 5
# Characters of text an answer may hold (`max_chars`; its default is ANSWER_MAX_CHARS): at least a
# sentence or two, at most what no agent's context should take from one search.
MIN_ANSWER_CHARS = 200
MAX_ANSWER_CHARS = 100_000
# Paragraphs a search returns unless asked for more (measure's own default is services.measure's).
DEFAULT_MOST = 5

# The longest period of a synced collection's folder checks: a week (a longer one is a schedule nobody
# would notice stopping). The model's validator, the sync service and SYNC_EVERY's check read it.
MAX_SYNC_MINUTES = 7 * 24 * 60
