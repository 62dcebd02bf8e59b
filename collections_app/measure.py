"""Measuring variants of a collection against questions whose answers are known (DESIGN.md §7).

Each variant — a chunking method, a size, and an ``around`` — gets a scratch index held in memory
(`collections_app.scratch`): the documents chunked the variant's way, each paragraph embedded, a
`BM25Index` and a matrix, and with entries (ENTRIES) the entries of its lists, tables and Q/A runs as a
build indexes them. Every question is then ranked by the ranking step a search uses
(`collections_app.ranking`: fuse with the best entry, floor, top k, stitch), so what a variant finds here
is what a collection built that way would answer. Nothing is stored: the scratch index is thrown away with
the variant.

A question *is found* when the answer marker appears in a returned paragraph's text, compared
case-insensitively and with runs of whitespace collapsed to one space (stitching rejoins pieces
with a single space, so a marker straddling a chunk boundary is still found). Its rank is the
1-based position of the first returned paragraph holding the marker. It is *found at 1* when the
answer asked for one paragraph (``most`` 1) holds the marker: a lower hit merged into the first
paragraph of a deeper answer ranks it 1 without the question's best hit holding the answer, so
rank 1 and found at 1 differ. A control question has no
answer in the corpus; only its best score matters, because a floor above it is what would turn
it into "nothing here answers this".

Unfloored by default (floor 0): every row carries its score and the floor range is read off the
result — the lowest score at which an answer was found against the highest score a control got.

Pure: no Django models, no settings. The caller passes the extracted texts and an embed function.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ragsite.analyzers import SIMPLE, terms_of
from ragsite.analyzers import analyzer as get_analyzer
from ragsite.division import TokenCounter
from ragsite.fusion import clears_floor
from ragsite.lexical import BM25Index, terms

from .index.vector_codec import decode, encode
from .ranking import ranked_runs
from .scratch import ScratchIndex, add_entries
from .text.chunking import (
    AVAILABLE,
    DEFAULT_SIZES,
    TOKEN_METHODS,
    ChunkingError,
    chunk,
    resolve_sizes,
    returns_sections,
)
from .text.context import contexts_for, embedding_text
from .text.entries import entry_spans
from .text.stitch import Row, Stitched, carried_openings, fresh_text
from .text.windows import model_windows

DEFAULT_AROUNDS = (0, 1)

Embed = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class Question:
    """A question and the text that marks its answer; ``answer`` None makes it a control."""

    text: str
    answer: str | None = None

    @property
    def control(self) -> bool:
        return self.answer is None


@dataclass(frozen=True)
class Variant:
    """One way of building and reading the index: chunking method, size, overlap, around."""

    method: str
    size: int | None
    overlap: int
    around: int

    def as_dict(self) -> dict:
        return {"method": self.method, "size": self.size, "overlap": self.overlap, "around": self.around}


def default_sizes(method: str, window: int | None = None) -> list[int | None]:
    """The sizes a method is measured at by default: half its default, the default, and double.

    ``window``'s default (None) is the embedder's own token window, and a window wider than the
    model reads would only be truncated, so it is measured at half the window and the window.
    """
    size = DEFAULT_SIZES[method][0]
    if size is None:
        return [window // 2, None] if window and window >= 8 else [None]
    return [max(1, size // 2), size, size * 2]


def grid(
    methods: Iterable[str] = AVAILABLE,
    *,
    sizes: Mapping[str, Sequence[int | None]] | None = None,
    arounds: Sequence[int] = DEFAULT_AROUNDS,
    can_count_tokens: bool = True,
    window: int | None = None,
) -> tuple[list[Variant], list[dict]]:
    """Every method × size × around, and the (method, size) pairs skipped with the reason why.

    ``sizes`` overrides `default_sizes` per method. ``tokens`` and ``window`` need an embedder that
    counts tokens; without one (``can_count_tokens`` False) they are skipped rather than failing.
    A size the method refuses (`resolve_sizes`) is skipped with the chunker's own message.
    """
    variants: list[Variant] = []
    skipped: list[dict] = []
    for method in methods:
        if method in TOKEN_METHODS and not can_count_tokens:
            skipped.append(
                {
                    "method": method,
                    "size": None,
                    "reason": f'"{method}" needs an embedder that counts tokens, and this one cannot',
                }
            )
            continue
        for size in (sizes or {}).get(method) or default_sizes(method, window):
            try:
                resolved, overlap = resolve_sizes(method, size, None)
            except ChunkingError as exc:
                skipped.append({"method": method, "size": size, "reason": str(exc)})
                continue
            for around in arounds:
                variant = Variant(method, resolved, overlap, int(around))
                if variant not in variants:
                    variants.append(variant)
    return variants, skipped


class VectorCache:
    """Embeddings by text, so a paragraph (or question) shared by several variants is embedded once.

    ``embed`` None means lexical only: nothing is embedded and `vectors` answers None.
    """

    def __init__(self, embed: Embed | None, *, batch_size: int = 64) -> None:
        self.embed = embed
        self.batch_size = max(1, batch_size)
        self._vectors: dict[str, np.ndarray] = {}
        self.embedded = 0  # distinct texts sent to the embedder

    def vectors(self, texts: Sequence[str]) -> np.ndarray | None:
        """A (len(texts), d) float32 matrix of unit rows, embedding only texts not seen before."""
        if self.embed is None:
            return None
        missing = list(dict.fromkeys(t for t in texts if t not in self._vectors))
        for start in range(0, len(missing), self.batch_size):
            batch = missing[start : start + self.batch_size]
            for text, vector in zip(batch, np.asarray(self.embed(batch), dtype=np.float32), strict=True):
                self._vectors[text] = vector
            self.embedded += len(batch)
        if not texts:
            return None
        return np.stack([self._vectors[t] for t in texts])


def scratch_index(
    documents: Sequence[str],
    variant: Variant,
    *,
    cache: VectorCache,
    tokens: TokenCounter | None = None,
    names: Sequence[str] | None = None,
    analyzer: str = SIMPLE,
    entries: bool = False,
) -> ScratchIndex:
    """Chunk every document the variant's way and index the paragraphs, ordinals running across them.

    Each paragraph is indexed with its context (title › section, `context.py`) as a build indexes
    it, in ``analyzer``'s terms (the collection's); ``names`` are the documents' names, which title a
    document without a heading. ``entries`` (ENTRIES): the entries of its lists, tables and Q/A runs
    are embedded and indexed as a build with entries embeds and indexes them (`scratch.add_entries`).
    Raises `ChunkingError` when the variant cannot chunk (a token method without a counter).
    """
    rows: list[Row] = []
    contexts: list[str] = []
    for number, text in enumerate(documents):
        pieces = chunk(text, variant.method, size=variant.size, overlap=variant.overlap, tokens=tokens)
        starts, labels = [p.start for p in pieces], [p.entry for p in pieces]
        contexts.extend(contexts_for(names[number] if names else "", text, starts, labels))
        for k, piece in enumerate(pieces):
            rows.append(
                Row(
                    ordinal=len(rows),
                    document=number,
                    start=piece.start,
                    end=piece.end,
                    text=piece.text,
                    section=piece.section,
                    index=k,
                )
            )
    texts = [row.text for row in rows]
    # Each embedded from the end of what it shares with earlier rows, as a build embeds it.
    carried = [length for length, _first in carried_openings((r.document, r.start, r.end) for r in rows)]
    # A paragraph longer than the model's window is embedded as its windows, as a build embeds it
    # (windows.embed_in_windows), so a variant's long paragraphs are pooled as search pools them.
    windows = [
        model_windows(embedding_text(fresh_text(t, n), c), tokens)
        if tokens is not None
        else [embedding_text(fresh_text(t, n), c)]
        for t, n, c in zip(texts, carried, contexts, strict=True)
    ]
    matrix = cache.vectors([piece for pieces in windows for piece in pieces])
    window_row = None
    if matrix is not None:
        # Through the store's float16, as a build stores them, so a variant ranks as search would.
        matrix = decode(encode(matrix), matrix.shape[1])
        if any(len(pieces) > 1 for pieces in windows):
            window_row = np.repeat(np.arange(len(windows)), [len(pieces) for pieces in windows])
    index = ScratchIndex(
        rows=rows,
        bm25=BM25Index.from_terms(terms_of(analyzer, texts)),
        matrix=matrix,
        window_row=window_row,
        context_bm25=BM25Index.from_terms(terms_of(analyzer, contexts)) if any(contexts) else None,
        analyzer=analyzer,
    )
    if entries and matrix is not None:  # a lexical build has no entries (services.indexes.entries)
        spans = [entry_spans(text, n) for text, n in zip(texts, carried, strict=True)]
        _embed_entries(index, cache, contexts, spans)
    return index


def _embed_entries(
    index: ScratchIndex, cache: VectorCache, contexts: Sequence[str], spans: Sequence[list[tuple[int, int]]]
) -> None:
    """Each row's entries embedded with its context, one vector an entry, as a build embeds them
    (`services.builds.embed`), through the store's float16, then added to ``index``."""
    wanted = [
        embedding_text(row.text[a:b], context)
        for row, context, row_spans in zip(index.rows, contexts, spans, strict=True)
        for a, b in row_spans
    ]
    if not wanted:
        return
    matrix = cache.vectors(wanted)
    matrix = decode(encode(matrix), matrix.shape[1])
    ends = np.cumsum([len(row_spans) for row_spans in spans])
    blocks = np.split(matrix, ends[:-1])
    add_entries(index, contexts, spans, [block if len(block) else None for block in blocks])


def rank(
    index: ScratchIndex,
    question: str,
    vector: np.ndarray | None,
    *,
    weight: float,
    most: int,
    around: int,
    floor: float = 0.0,
    readable: Mapping[int, Row] | None = None,
    searchable: np.ndarray | None = None,
    sections: bool = False,
    max_chars: int | None = None,
) -> list[Stitched]:
    """The paragraphs a search would return, best first: the search's own ranking step
    (`ranking.ranked_runs`: fuse, floor, take ``most``, stitch, fit ``max_chars``). ``searchable`` (a
    bool per row) leaves rows out of the ranking as a search leaves out documents held back for review;
    by default every row ranks.
    """
    return ranked_runs(
        index,
        get_analyzer(index.analyzer).terms(question),
        vector if index.matrix is not None else None,
        weight=weight,
        most=most,
        floor=floor,
        around=around,
        rows=readable if readable is not None else index.readable,
        readable=searchable,
        sections=sections,
        max_chars=max_chars,
        answer_terms=terms(question),
    )


def normalise(text: str) -> str:
    """Casefolded, with every run of whitespace one space: how markers and paragraphs are compared."""
    return " ".join(text.split()).casefold()


def find_answer(runs: Sequence[Stitched], marker: str) -> dict:
    """found, rank (1-based, of the first paragraph holding the marker) and that paragraph's score."""
    wanted = normalise(marker)
    for position, run in enumerate(runs, start=1):
        if wanted in normalise(run.text):
            return {"found": True, "rank": position, "score": round(run.score, 6)}
    return {"found": False, "rank": None, "score": None}


def floor_range(answer_scores: Iterable[float], control_scores: Iterable[float | None]) -> dict:
    """The floor range read off a result: lowest score of a found answer vs highest control score.

    A floor ``f`` with ``highest_control < f <= lowest_answer`` keeps every answer that was found
    and returns nothing for every control; ``separates`` says whether such a floor exists, and is
    None when there is nothing to compare (no answer found, or no controls).

    A control score of None is a control that returned nothing: under a floor it scored below it,
    which is no score at all (seed 000), never 0.0. It takes no part in ``highest_control``, and
    when every control returned nothing the floor in use is itself one that separates.
    """
    answers = list(answer_scores)
    controls = list(control_scores)
    scored = [score for score in controls if score is not None]
    lowest = min(answers) if answers else None
    highest = max(scored) if scored else None
    if lowest is None or not controls:
        separates = None
    else:
        separates = highest is None or lowest > highest
    return {"lowest_answer": lowest, "highest_control": highest, "separates": separates}


def outcomes(
    index: ScratchIndex,
    questions: Sequence[Question],
    vectors: np.ndarray | None,
    *,
    weight: float,
    most: int,
    around: int,
    floor: float = 0.0,
    searchable: np.ndarray | None = None,
    sections: bool = False,
    max_chars: int | None = None,
) -> tuple[list[dict], list[dict]]:
    """Ask every question of one index: (answered, controls), in the order the questions came.

    An answered row is the question, its marker, `find_answer`'s found/rank/score, whether the answer
    at ``most`` 1 holds the marker (``found_at_1``), the best score returned and how many paragraphs
    came back; a control row is its best score and that count.
    ``vectors`` holds a row per question (None when the index is lexical). ``max_chars``: the answer
    budget a search applies (None: none), so a question counts as found only when the answer holds it.
    """
    readable = index.readable
    answered: list[dict] = []
    controls: list[dict] = []
    for number, question in enumerate(questions):
        vector = vectors[number] if vectors is not None else None
        runs = rank(
            index,
            question.text,
            vector,
            weight=weight,
            most=most,
            around=around,
            floor=floor,
            readable=readable,
            searchable=searchable,
            sections=sections,
            max_chars=max_chars,
        )
        top = round(runs[0].score, 6) if runs else None
        if question.control:
            controls.append({"question": question.text, "top_score": top, "returned": len(runs)})
        else:
            outcome = find_answer(runs, question.answer or "")
            first = outcome["rank"] == 1 and (
                most == 1
                or find_answer(
                    rank(
                        index,
                        question.text,
                        vector,
                        weight=weight,
                        most=1,
                        around=around,
                        floor=floor,
                        readable=readable,
                        searchable=searchable,
                        sections=sections,
                        max_chars=max_chars,
                    ),
                    question.answer or "",
                )["found"]
            )
            answered.append(
                {
                    "question": question.text,
                    "answer": question.answer,
                    **outcome,
                    "found_at_1": first,
                    "top_score": top,
                    "returned": len(runs),
                }
            )
    return answered, controls


def measured_floor(answer_scores: Iterable[float], control_scores: Iterable[float], *, keep: float) -> dict:
    """The floor read off known answers: the midpoint of the gap when answers and controls separate,
    else a floor expected to keep ``keep`` of the answers — of questions like these, not only of these.

    The known answers are a sample of the questions a collection is asked. Set at the j-th lowest
    of n sampled scores, a floor keeps on average (n + 1 - j) / (n + 1) of the population the
    sample came from (the expected coverage of an order statistic), so the floor is set at the
    highest j with that share at least ``keep``: j = ⌊(1 - keep)(n + 1)⌋, or the lowest answer
    while the sample is too small to spare any (fewer than 39 answers at 0.95). It keeps at least
    ``keep`` of the known answers too. Reading j off the sample alone (⌈keep·n⌉ kept) overfits: on SciFact
    such a floor kept 95 % of 53 known answers and 79 % of 53 unseen ones (docs/decisions/0033).

    ``answer_scores`` are the scores at which answers were found unfloored (an answer not found
    is out of every floor's reach and takes no part); ``control_scores`` are the controls' best
    scores. Scores are rounded to 6 decimals, so a floor taken from a score is set 1e-6 below
    it and still keeps the answer it was read from. Returns ``floor`` (None when no answer was
    found), ``rule`` ("midpoint", "keep" or None), ``kept`` (answers at or above the floor) and
    ``controls_above`` (controls that would still get paragraphs back).
    """
    answers = sorted(answer_scores)
    controls = list(control_scores)
    if not answers:
        return {"floor": None, "rule": None, "kept": 0, "controls_above": None}
    lowest, highest = answers[0], (max(controls) if controls else None)
    if highest is not None and lowest > highest:
        floor, rule = min(round((lowest + highest) / 2, 6), _just_below(lowest)), "midpoint"
    else:
        j = max(1, math.floor((1 - keep) * (len(answers) + 1) + 1e-9))  # 1e-9: 0.05 × 20 is 1, not 0.999…
        floor, rule = _just_below(answers[j - 1]), "keep"
    return {
        "floor": floor,
        "rule": rule,
        "kept": int(np.count_nonzero(clears_floor(answers, floor))),
        "controls_above": int(np.count_nonzero(clears_floor(controls, floor))),
    }


def _just_below(score: float) -> float:
    return max(0.0, round(score - 1e-6, 6))


def measure_variant(
    documents: Sequence[str],
    variant: Variant,
    questions: Sequence[Question],
    *,
    cache: VectorCache,
    weight: float,
    most: int,
    floor: float = 0.0,
    tokens: TokenCounter | None = None,
    names: Sequence[str] | None = None,
    max_chars: int | None = None,
    analyzer: str = SIMPLE,
    entries: bool = False,
) -> dict:
    """One variant's row of the report: its paragraphs, each question's outcome (within ``max_chars``, the
    answer budget, as a search answers), the floor range; the keyword leg reads with ``analyzer``, and
    ``entries`` (ENTRIES) scores a paragraph by its best entry too, as a search does."""
    index = scratch_index(
        documents, variant, cache=cache, tokens=tokens, names=names, analyzer=analyzer, entries=entries
    )
    vectors = cache.vectors([q.text for q in questions]) if index.matrix is not None else None
    answered, controls = outcomes(
        index,
        questions,
        vectors,
        weight=weight,
        most=most,
        around=variant.around,
        floor=floor,
        sections=returns_sections(variant.method),
        max_chars=max_chars,
    )
    found = [q["score"] for q in answered if q["found"]]
    return {
        **variant.as_dict(),
        "paragraphs": len(index.rows),
        "found": len(found),
        "questions": answered,
        "controls": controls,
        "floor_range": floor_range(found, [c["top_score"] for c in controls]),
    }
