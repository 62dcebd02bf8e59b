"""Recall's second pass: what the first pass found, as words to search with again.

Pure: no models, no settings. A multi-hop question ("Where did Caroline move after the adoption
agency called?") often has its second piece of evidence in another session that shares a name, a
place or a date with the first piece but few words with the question. `found_terms` takes the names
(capitalised words), numbers and dates of the first pass's best excerpts that the question does not
already hold, and keeps the rarest among the agent's records: a speaker's name, in every record,
says nothing; a friend's, a town's or a year's does. `services.recall` searches again with the
question's terms and these, and merges the two passes' fused scores.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable

from ragsite.lexical import terms

# A name (a capitalised word, an initialism) or a number (a year, a day): what a second session shares.
_NAMED = re.compile(r"(?<![\w'])(?:[A-Z][\w'-]*|\d[\d/.-]*)")


def found_terms(
    texts: Iterable[str],
    query_terms: Iterable[str],
    idf: Callable[[str], float],
    *,
    most: int,
    least_idf: float = 0.0,
    analyze: Callable[[str], list[str]] = terms,
) -> list[str]:
    """At most `most` terms of the names and numbers in `texts`, none of `query_terms`, rarest first
    (highest `idf`, then the most often found, then the first seen); none with idf at or below
    `least_idf` (held by most records). `analyze` turns a name into the keyword leg's terms (the
    recall index's analyzer, so a stemmed or bigrammed term is looked up as it is indexed)."""
    asked = set(query_terms)
    counts: Counter[str] = Counter()
    for text in texts:
        for match in _NAMED.finditer(text):
            for term in analyze(match.group()):
                if term not in asked:
                    counts[term] += 1
    ranked = sorted(counts, key=lambda term: (-idf(term), -counts[term]))
    return [term for term in ranked if idf(term) > least_idf][:most]
