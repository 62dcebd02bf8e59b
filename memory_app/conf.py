"""Memory's settings and limits, read lazily in one place.

Settings are looked up through `ragsite.conf` when used, never at import time, so
`override_settings` works in tests. The limits below are the API's contract, not settings.
"""

from __future__ import annotations

from django.core.exceptions import ImproperlyConfigured

from ragsite.analyzers import UnknownAnalyzer, check_name
from ragsite.conf import settings

from .models import MAX_TEXT_LENGTH

__all__ = [
    "DEFAULT_MOST",
    "MAX_MOST",
    "MAX_QUERY_LENGTH",
    "MAX_TEXT_LENGTH",
    "MAX_RECALL_CHARS",
    "OPENING_LENGTH",
    "EXCERPT_LENGTH_EXPONENT",
    "EXCERPT_LENGTH_REFERENCE",
    "EXCERPT_SHARE",
    "EXCERPT_PIECE",
    "NODE_SCORE_MIX",
    "RECALL_FUSION_WEIGHT",
    "RECALL_REDUNDANCY",
    "RECALL_SECOND_PASS",
    "RECALL_SECOND_PASS_FROM",
    "RECALL_SECOND_PASS_LEAST_IDF",
    "RECALL_SECOND_PASS_TERMS",
    "RECALL_REPEAT_PENALTY",
    "REPAIR_LIMIT",
    "REPORT_IDS",
    "health_repair_minutes",
    "memory_analyzer",
    "recall_max_chars",
]

MAX_QUERY_LENGTH = 2_000
MAX_MOST = 50
DEFAULT_MOST = 5
# One health repair builds at most this many records' nodes (seed 002 §3); a backlog converges
# over successive runs instead of holding the queue for minutes.
REPAIR_LIMIT = 50
# A record whose nodes are pending is quoted by its opening, about this many characters.
OPENING_LENGTH = 300
# A recall answers at most this many characters, whatever `max_chars` asks (50 excerpts of
# 2,000 characters).
MAX_RECALL_CHARS = 100_000
# The share of the cosine in recall's fused score (ragsite.fusion.hybrid_scores): lower than collection
# search's, because conversations name people and events, and words count more. Chosen on the LoCoMo dev
# split with the two constants below (bench/memory/memory_locomo.py --only-sweep); figures in
# docs/decisions/0028.
RECALL_FUSION_WEIGHT = 0.35
# How a node's score mixes its parts (recall_index.RecallIndex.level_scores): (best of itself and its
# passages + a * itself + b * its second-best passage + c * its record) / (1 + a + b + c). The best
# passage alone finds a fact diluted in a node; the rest says how much of the node, and of its record,
# is about the question (docs/decisions/0028).
NODE_SCORE_MIX = (0.3, 0.3, 0.2)
# No excerpt is longer than this share of the budget: a longer candidate is quoted by its best run of
# whole lines that fits. One ~900-character node would otherwise spend a 1,000-character budget on
# one place; larger budgets and `most` alone are unchanged by it (a node is shorter than 70 % of 2,000).
EXCERPT_SHARE = 0.7
# A node competes part by part (memory_app.excerpts.select, `piece`): it is first quoted by its best run of
# whole lines of at most this share of its length, and what that leaves out is a candidate again, scored
# by the passages it holds (excerpts.node_rest_score); with `most` excerpts held, the rests of theirs may
# still join them. A large budget then holds more places rather than whole nodes. 0 turns it off (a node
# is quoted whole). Chosen on LoCoMo's tuning part, checked on its check part: docs/decisions/0096.
EXCERPT_PIECE = 0.67
# Per-excerpt length normalisation: a candidate's score is multiplied by
# (its characters / EXCERPT_LENGTH_REFERENCE) ** -EXCERPT_LENGTH_EXPONENT; 0 turns it off. Off: every
# exponent measured cost recall somewhere (docs/decisions/0028).
EXCERPT_LENGTH_EXPONENT = 0.0
EXCERPT_LENGTH_REFERENCE = 1000
# Diversity of what a recall quotes (memory_app.excerpts.diversified): a candidate's score is multiplied by
# (1 - RECALL_REPEAT_PENALTY) for each candidate already taken from its record, and lowered by
# RECALL_REDUNDANCY times its highest cosine with one taken; 0 and 0 take candidates in score order.
RECALL_REPEAT_PENALTY = 0.0
RECALL_REDUNDANCY = 0.0
# Recall's second pass (services.recall._second_pass, memory_app.expansion): the names and numbers of the
# first pass's RECALL_SECOND_PASS_FROM best candidates (at most RECALL_SECOND_PASS_TERMS of them, each
# rarer than idf RECALL_SECOND_PASS_LEAST_IDF) are added to the question and searched again; the two
# passes' scores merge as (1 - w) * first + w * second with w = RECALL_SECOND_PASS (0: one pass).
RECALL_SECOND_PASS = 0.0
RECALL_SECOND_PASS_FROM = 2
RECALL_SECOND_PASS_TERMS = 4
RECALL_SECOND_PASS_LEAST_IDF = 0.5
# The health report lists at most this many record ids; its counts are always exact.
REPORT_IDS = 1_000


def health_repair_minutes() -> int:
    """`HEALTH_REPAIR_MINUTES`: how often the scheduled repair runs; at least 1."""
    return max(1, int(settings.HEALTH_REPAIR_MINUTES))


def recall_max_chars() -> int:
    """`MEMORY_RECALL_MAX_CHARS`: the characters a recall answers when the caller does not say."""
    return int(settings.MEMORY_RECALL_MAX_CHARS)


def memory_analyzer() -> str:
    """`MEMORY_ANALYZER`: how recall's keyword leg reads words (a name of `ragsite.analyzers`: simple,
    cjk, english, …); the default, simple, is seed 004's terms. Another name is ImproperlyConfigured,
    which the system check memory.E003 reports at start."""
    name = settings.MEMORY_ANALYZER
    try:
        return check_name(name)
    except UnknownAnalyzer as exc:
        raise ImproperlyConfigured(f"MEMORY_ANALYZER: {exc}") from None
