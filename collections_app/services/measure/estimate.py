"""How long a measurement of a collection will take, said before it starts.

A measurement cuts the documents every default way and embeds each cut afresh (the variants that
differ only in `around` share their vectors), so it costs about one full build per way of cutting. The
collection's own last build that embedded most of its paragraphs says what one costs on this machine
and model; without one there is no honest figure, and the estimate says so.
"""

from dataclasses import dataclass

from ragsite import embedding

from ...models import BuildRun, Collection, Paragraph
from . import _counts_tokens, _variants

# A build that embedded fewer paragraphs than this says too little about the model's speed.
MIN_REFERENCE_PARAGRAPHS = 10


@dataclass(frozen=True)
class MeasureEstimate:
    variants: int
    cuttings: int  # distinct (method, size, overlap): each is chunked and embedded once
    paragraphs: int  # stored in the collection now
    seconds: int | None  # None: no build to go by
    reference_build: int | None
    reference_seconds: float | None
    reference_embedded: int | None


def estimate_measure(*, collection: Collection) -> MeasureEstimate:
    embedder = embedding.get_embedder()
    chosen, _skipped = _variants(None, _counts_tokens(embedder), embedder.window, collection)
    cuttings = len({(v.method, v.size, v.overlap) for v in chosen})
    paragraphs = Paragraph.objects.filter(collection=collection).count()
    reference = (
        BuildRun.objects.filter(
            collection=collection,
            status=BuildRun.SUCCEEDED,
            started_at__isnull=False,
            finished_at__isnull=False,
            paragraphs_embedded__gte=MIN_REFERENCE_PARAGRAPHS,
            model=embedder.model,
        )
        .order_by("-finished_at")
        .first()
    )
    if embedder.backend == "none" or reference is None:
        return MeasureEstimate(len(chosen), cuttings, paragraphs, None, None, None, None)
    spent = (reference.finished_at - reference.started_at).total_seconds()
    per_paragraph = spent / reference.paragraphs_embedded
    seconds = max(1, round(cuttings * paragraphs * per_paragraph))
    return MeasureEstimate(
        len(chosen),
        cuttings,
        paragraphs,
        seconds,
        reference.pk,
        round(spent, 1),
        reference.paragraphs_embedded,
    )
