"""Two `beir.py` runs over the same queries compared query by query: each run's nDCG@10 with a bootstrap
95 % interval, and the paired difference (second minus first) with its own, plus how many queries
each run won.

    python bench/beir/compare.py bench/results/beir-scifact-test-hybrid.json \\
        bench/results/beir-scifact-test-hybrid-english.json

The intervals resample the queries (10,000 draws, a fixed seed): the paired one resamples the per-query
differences, which is what says whether one run beats the other on this query set rather than by luck
of which queries it holds. Two runs whose difference interval holds 0 are not told apart.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

DRAWS = 10_000
SEED = 20261205


def interval(values: np.ndarray, rng: np.random.Generator) -> tuple[float, float]:
    """The 2.5th and 97.5th percentiles of the mean of ``values`` resampled with replacement."""
    picks = rng.integers(0, values.size, size=(DRAWS, values.size))
    means = values[picks].mean(axis=1)
    return float(np.percentile(means, 2.5)), float(np.percentile(means, 97.5))


def compare(first: dict, second: dict) -> dict:
    a, b = first["ndcg@10_per_query"], second["ndcg@10_per_query"]
    if set(a) != set(b):
        raise SystemExit("the two runs asked different queries")
    ids = sorted(a)
    x = np.array([a[q] for q in ids])
    y = np.array([b[q] for q in ids])
    rng = np.random.default_rng(SEED)
    return {
        "queries": len(ids),
        "first": {"ndcg@10": float(x.mean()), "interval": interval(x, rng)},
        "second": {"ndcg@10": float(y.mean()), "interval": interval(y, rng)},
        "difference": {"mean": float((y - x).mean()), "interval": interval(y - x, rng)},
        "second_better": int((y > x).sum()),
        "first_better": int((y < x).sum()),
        "tied": int((y == x).sum()),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    args = parser.parse_args()
    first, second = (json.loads(path.read_text()) for path in (args.first, args.second))
    result = compare(first, second)
    for name, run in (("first", first), ("second", second)):
        low, high = result[name]["interval"]
        what = f"{run.get('mode')} {run.get('analyzer', 'simple')}"
        print(f"{name}: {what} nDCG@10 {result[name]['ndcg@10']:.4f} [{low:.4f}, {high:.4f}]")
    low, high = result["difference"]["interval"]
    print(f"difference (second - first): {result['difference']['mean']:+.4f} [{low:+.4f}, {high:+.4f}]")
    print(
        f"queries: {result['queries']}; second better on {result['second_better']}, first better on "
        f"{result['first_better']}, tied on {result['tied']}"
    )


if __name__ == "__main__":
    main()
