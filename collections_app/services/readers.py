"""Who a per-reader search answers for, and what of a row that reader may see.

Kept apart from the ranking in `search`: an unknown reader id must answer exactly as a known
reader holding no labels (so ids cannot be probed), and a readable row must not bring back the
text it shares with an earlier row the reader may not read (the structure strategy's overlap).
"""

import numpy as np
from django.db import connection

from ragsite.errors import RagsiteError

from ..mapped_index import MappedIndex
from ..models import Collection, Document, Paragraph, Reader
from ..stitch import Row, cut_opening

NO_LABELS = Reader(external_id="")  # an unsaved reader holding nothing: reads unlabelled paragraphs only


def resolve_reader(collection: Collection, reader: str | None) -> Reader | None:
    """The reader a per-reader search answers for. An unknown id reads as a reader holding no
    labels (unlabelled paragraphs only), exactly like a known reader holding none, so the
    answer never says whether an id exists; a collection that is not per-reader ignores it."""
    if not collection.per_reader:
        return None
    if reader is None or reader == "":
        raise RagsiteError(
            f'collection "{collection.name}" answers per reader: say which reader with "reader"',
            code="reader_required",
        )
    if "\x00" in reader or len(reader) > 200:  # cannot be stored, so cannot be known; never queried
        return NO_LABELS
    return Reader.objects.filter(external_id=reader).first() or NO_LABELS


def held_back(collection: Collection) -> tuple[np.ndarray, np.ndarray]:
    """Ids of the collection's documents out of search (in review, refused, switched off) and of
    its switched-off paragraphs, in one statement.

    Asked on every search, so a switch takes effect at the next question without a new build.
    Both sets are few, and each condition is written as its partial index's own (document_held_back,
    paragraph_disabled), so the planner reads only those rows; tests/collections/test_search_index.py
    reads the plans. Through the ORM the two queries cost 0.6 ms to build and compile, this one
    0.08 ms (100,000 paragraphs, docs/benchmarks.md); with the models' default ordering they walked
    every paragraph of the collection (170-590 ms).
    """
    quote = connection.ops.quote_name
    sql = (
        f"SELECT 0, id FROM {quote(Document._meta.db_table)} "
        "WHERE collection_id = %s AND (NOT (status = %s) OR NOT enabled) "
        f"UNION ALL SELECT 1, id FROM {quote(Paragraph._meta.db_table)} WHERE collection_id = %s AND NOT enabled"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [collection.pk, Document.ACTIVE, collection.pk])
        found = cursor.fetchall()
    documents = np.asarray([pk for kind, pk in found if kind == 0], dtype=np.int64)
    paragraphs = np.asarray([pk for kind, pk in found if kind == 1], dtype=np.int64)
    return documents, paragraphs


# Rows of a document advance in start and end, and overlap is smaller than a piece, so the
# earlier rows a row can share text with are its few predecessors.
OVERLAP_REACH = 3


def cut_hidden_copies(index: MappedIndex, mask: np.ndarray, readable: dict[int, Row]) -> None:
    """Each row less the opening it shares with earlier rows of its document this search may not read.

    The structure strategy copies the end of a piece into the next; labels are per paragraph and
    change after a build, so the copy is cut here, per search (stitch.cut_opening, docs/security.md).
    Only the ends of those hidden predecessors are read, in one query.
    """
    if mask.all():
        return
    documents = index.row_document
    behind = {
        j: int(index.row_paragraph[j])
        for r in readable for j in range(max(0, r - OVERLAP_REACH), r)
        if not mask[j] and documents[j] == documents[r]
    }
    if not behind:
        return
    ends = dict(Paragraph.objects.filter(pk__in=list(behind.values())).order_by().values_list("id", "end_char"))
    for r, row in list(readable.items()):
        hidden_ends = [ends[behind[j]] for j in range(max(0, r - OVERLAP_REACH), r)
                       if j in behind and documents[j] == documents[r] and behind[j] in ends]
        readable[r] = cut_opening(row, hidden_ends)
