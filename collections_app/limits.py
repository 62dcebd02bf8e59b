"""The limits of a search request, declared once: the API's schema, the MCP tool's input schema, the
admin's forms, the checks and the services all read them from here."""

MAX_QUESTION_CHARS = 2000
MAX_MOST = 50
# Paragraphs either side of a hit, at most: for a request, a collection's override and AROUND.
MAX_AROUND = 5
# Paragraphs a search returns unless asked for more (measure's own default is services.measure's).
DEFAULT_MOST = 5
