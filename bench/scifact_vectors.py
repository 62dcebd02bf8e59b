"""SciFact's abstracts and claims embedded by the project's local model, as the .npy files
`bench/ivf_build.py --data scifact` reads (`--scifact-vectors`, `--scifact-queries`).

Each abstract is "title text", truncated to the model's window as a build's first window is; each claim
as a question is embedded. Both unit-length float32, in corpus and queries order.

    python bench/scifact_vectors.py ../shared/datasets/scifact data/bench/scifact-vectors
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="a BEIR SciFact folder (corpus.jsonl.gz, queries.jsonl)")
    parser.add_argument("out", type=Path, help="folder for corpus.npy and queries.npy")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ["EMBED_BACKEND"] = "local"
    import django

    django.setup()
    from ragsite.embedding import get_embedder

    with gzip.open(args.dataset / "corpus.jsonl.gz", "rt", encoding="utf-8") as f:
        abstracts = [f"{d['title']} {d['text']}".strip() for d in map(json.loads, f)]
    with open(args.dataset / "queries.jsonl", encoding="utf-8") as f:
        claims = [q["text"] for q in map(json.loads, f)]
    embedder = get_embedder("local")
    args.out.mkdir(parents=True, exist_ok=True)
    for name, texts in (("queries", claims), ("corpus", abstracts)):
        started = time.perf_counter()
        vectors = np.concatenate(
            [embedder.embed(texts[at : at + 256]) for at in range(0, len(texts), 256)]
        ).astype(np.float32)
        np.save(args.out / f"{name}.npy", vectors)
        print(f"{name}: {vectors.shape} in {time.perf_counter() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
