"""Who a per-reader search answers for, and what of a row that reader may see.

Kept apart from the ranking in `search`: an unknown reader id must answer exactly as a known
reader holding no labels (so ids cannot be probed), and a readable row must not bring back the
text it shares with an earlier row the reader may not read (the structure strategy's overlap).
"""

import numpy as np

from ragsite.errors import RagsiteError

from ...index.mapped import MappedIndex
from ...models import Collection, Paragraph, Reader
from ...text.stitch import Row, cut_opening

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
    # A reader the identity provider has withdrawn (services/scim.py) reads as one holding nothing.
    return Reader.objects.filter(external_id=reader, withdrawn_at__isnull=True).first() or NO_LABELS


# Rows of a document advance in start and end. Without the index's `carried_from` (an index written
# before it), the earlier rows a row can share text with are looked for this far back: far enough for an
# overlap of up to 7/8 of the size; the index's own span is used whenever it has one.
OVERLAP_REACH = 8


def _sharing(index: MappedIndex, row: int) -> range:
    """The earlier rows `row` can share text with: the whole carried span, as scoring uses it
    (`carried_from`), so the text shown and the score obey one rule."""
    if index.carried_from is not None:
        return range(int(index.carried_from[row]), row)
    return range(max(0, row - OVERLAP_REACH), row)


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
        for r in readable
        for j in _sharing(index, r)
        if not mask[j] and documents[j] == documents[r]
    }
    if not behind:
        return
    ends = dict(
        Paragraph.objects.filter(pk__in=list(behind.values())).order_by().values_list("id", "end_char")
    )
    for r, row in list(readable.items()):
        hidden_ends = [
            ends[behind[j]]
            for j in _sharing(index, r)
            if j in behind and documents[j] == documents[r] and behind[j] in ends
        ]
        readable[r] = cut_opening(row, hidden_ends)
