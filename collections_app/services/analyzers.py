"""A collection's analyzer (ragsite.analyzers): checked, changed, and the rebuild a change calls for.

The paragraphs do not depend on the analyzer, only the keyword index written from them does; but each
build records the analyzer its index was written with (`CollectionBuilt.analyzer`) and its searches ask
with that one, so a change takes effect as a whole when the next build commits, never half-way (a
question stemmed against an index of unstemmed terms would find nothing). Hence a change queues a build,
as a switch of per-reader answering does (services.labels).
"""

from __future__ import annotations

from ragsite.analyzers import UnknownAnalyzer, check_name
from ragsite.errors import RagsiteError

from .. import conf
from ..models import BuildRun, Collection, CollectionBuilt

INVALID_ANALYZER = "invalid_analyzer"
# Said to staff (Collection.rebuild_needed) until the queued build commits.
ANALYZER_CHANGED = "the analyzer changed; rebuild so the keyword index reads words the new way"


def analyzer_or_default(name: str | None) -> str:
    """``name`` checked (400 `invalid_analyzer` naming the choices), or ANALYZER when None."""
    if name is None:
        return conf.default_analyzer()
    try:
        return check_name(name)
    except UnknownAnalyzer as exc:
        raise RagsiteError(str(exc), code=INVALID_ANALYZER) from None


def set_analyzer(
    *, collection: Collection, analyzer: str, requested_by: str
) -> tuple[bool, BuildRun | None, str]:
    """Give ``collection`` another analyzer: (changed, the build queued, why none was queued).

    A built collection is marked for a rebuild and one is queued; when a build is already queued or
    running it is left to finish (it records the analyzer in force when it commits, reading it then), and
    the answer says so. A collection never built gets no build: its first one uses the analyzer.
    """
    name = analyzer_or_default(analyzer)
    changed = bool(Collection.objects.filter(pk=collection.pk).exclude(analyzer=name).update(analyzer=name))
    collection.analyzer = name
    if not changed:
        return False, None, "unchanged"
    if not CollectionBuilt.objects.filter(collection_id=collection.pk).exists():
        return True, None, "never built"
    Collection.objects.filter(pk=collection.pk).update(rebuild_needed=ANALYZER_CHANGED)
    from .readers.labels import rebuild_after_switch

    run, why = rebuild_after_switch(collection=collection, requested_by=requested_by)
    return True, run, why


__all__ = ["ANALYZER_CHANGED", "INVALID_ANALYZER", "analyzer_or_default", "set_analyzer"]
