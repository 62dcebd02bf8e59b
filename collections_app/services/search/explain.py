"""Why each answer scored what it did, piece by piece, for a person testing the collection (the admin's
playground; never the API)."""

from __future__ import annotations

import numpy as np

from ragsite import fusion
from ragsite.fusion import hybrid_scores, normalise_bm25, normalise_cosine

from ...ranking import Ranking, clears_floor, lifted_legs
from ...text.stitch import Row, Stitched
from .plan import SearchPlan, readable_mask
from .stitched import positions


def explain(
    plan: SearchPlan,
    ranking: Ranking,
    vector: np.ndarray | None,
    top: np.ndarray,
    runs: list[Stitched],
    readable: dict[int, Row],
) -> dict:
    """Each answer's pieces with their lexical and semantic parts, and how many rows this reader's
    labels hid.

    Each piece's parts are scored exactly (its cosine from the index, its BM25 from this search's), each
    lifted by its best entry's as ranking lifts it (`ranking.lifted_legs`).
    ``hidden_by_labels`` counts readable-to-everyone rows at or above the floor this reader cannot see;
    on the approximate path it counts among the candidates only.
    """
    index, lexical_arm = plan.index, ranking.lexical
    hits = {int(row) for row in top}
    at = positions(plan.mask)
    upper = 0.0 if lexical_arm is None else (lexical_arm.upper or 0.0)
    pieces = []
    for run in runs:
        parts = [row for row in range(run.first, run.last + 1) if row in readable]
        parts_rows = np.asarray(parts, dtype=np.int64)
        cosine = None if vector is None else index.row_cosines(vector, parts_rows, plan.view)
        lexical = None if lexical_arm is None else lexical_arm.scores[parts_rows]
        # Each part lifted by the piece's best entry as ranking lifts it: a hit's parts add up to its score.
        cosine, lexical = lifted_legs(cosine, lexical, upper, ranking.entries, parts_rows)
        fused, _mode = hybrid_scores(cosine, lexical, upper, weight=fusion.FUSION_WEIGHT)
        semantic = normalise_cosine(cosine) if cosine is not None else None
        lexical01 = normalise_bm25(lexical, upper) if lexical is not None else None
        pieces.append(
            [
                {
                    "paragraph": int(index.row_paragraph[row]),
                    "ordinal": at(int(row)),
                    "text": readable[int(row)].text,
                    "hit": int(row) in hits,
                    "score": round(float(fused[i]), 6),
                    "lexical": None if lexical01 is None else round(float(lexical01[i]), 6),
                    "semantic": None if semantic is None else round(float(semantic[i]), 6),
                }
                for i, row in enumerate(parts_rows.tolist())
            ]
        )
    hidden = 0
    if plan.reader is not None and plan.collection.per_reader and index.size and ranking.rows is None:
        everyone = readable_mask(plan.collection, index, None, plan.held_back)
        hidden = int(np.count_nonzero(everyone & ~plan.mask & clears_floor(ranking.scores, plan.floor)))
    return {"pieces": pieces, "hidden_by_labels": hidden}
