"""memory_locomo.py's plain baselines, in the bench's process over the same texts: bm25s, MiniLM and
their hybrid over single turns and over windows of consecutive turns, quoted by ragsite's own
selection (`memory_app.excerpts.select`) so a budget means the same characters for every method.

Imported by memory_locomo.py (which sets up Django and the store); not run alone.
"""

from __future__ import annotations

import time

from locomo_data import Session, Tally, found, settings_asked


def windows(session: Session, size: float) -> list[tuple[int, int]]:
    """Consecutive whole turn lines packed up to `size` characters (a longer turn is a window alone)."""
    out, start, end = [], None, None
    for a, b in session.lines:
        if start is None:
            start, end = a, b
        elif b - start <= size:
            end = b
        else:
            out.append((start, end))
            start, end = a, b
    if start is not None:
        out.append((start, end))
    return out


def minmax(values):
    import numpy as np

    values = np.asarray(values, dtype=np.float64)
    spread = values.max() - values.min() if values.size else 0.0
    return (values - values.min()) / spread if spread > 0 else np.zeros_like(values)


def baselines(conversations, tally: Tally, node_chars: float, facts: dict) -> None:
    import bm25s
    import numpy as np

    from memory_app.excerpts import WHOLE, Candidate, select
    from ragsite import embedding

    embedder = embedding.get_embedder()
    started = time.perf_counter()
    for conversation in conversations:
        texts = {("ep", s.record_id): s.text for s in conversation.sessions}
        questions = [q.question for q in conversation.questions]
        asked = np.asarray(embedder.embed(questions), dtype=np.float32)
        for unit_name, unit_spans in (
            ("turns", lambda s: s.lines),
            ("windows", lambda s: windows(s, node_chars)),
        ):
            units = [(s, a, b) for s in conversation.sessions for a, b in unit_spans(s)]
            unit_texts = [s.text[a:b] for s, a, b in units]
            retriever = bm25s.BM25()
            retriever.index(
                bm25s.tokenize(unit_texts, stopwords="en", show_progress=False), show_progress=False
            )
            vectors = np.asarray(embedder.embed(unit_texts), dtype=np.float32)
            for q, question in enumerate(conversation.questions):
                tokens = bm25s.tokenize(
                    [question.question], stopwords="en", return_ids=False, show_progress=False
                )
                lexical = retriever.get_scores(tokens[0])
                cosine = vectors @ asked[q]
                for method, scores in (
                    ("bm25s", lexical),
                    ("MiniLM", cosine),
                    ("hybrid", 0.5 * minmax(lexical) + 0.5 * minmax(cosine)),
                ):
                    order = np.lexsort((np.arange(len(units)), -np.asarray(scores)))
                    for name, most, max_chars in settings_asked():
                        candidates = (
                            Candidate(
                                "ep",
                                units[i][0].record_id,
                                WHOLE,
                                None,
                                units[i][1],
                                units[i][2],
                                float(scores[i]),
                            )
                            for i in order
                        )
                        chosen = select(
                            candidates,
                            lambda kind, id, texts=texts: texts[(kind, id)],
                            max_chars=max_chars,
                            most=most,
                        )
                        shown = [{"id": e.id, "start": e.start, "end": e.end} for e in chosen.excerpts]
                        tally.add(
                            f"{method} {unit_name}",
                            name,
                            question.category,
                            found(conversation, question, shown),
                            conversation.name,
                        )
    facts["baselines_s"] = time.perf_counter() - started
