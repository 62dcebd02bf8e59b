"""One process, two versions of the search path: an earlier commit's against the working tree's, interleaved.

    python bench/search_ab.py --base <commit>                     # lexical and vector IVF at 100k
    python bench/search_ab.py --base <commit> --arms lexical --rounds 5 --profile

The search path's own modules (collections_app.services.search, services.rows, services.readers,
ranking, text.stitch, text.budget, index.bm25_top) are loaded a second time from `git show <commit>`
under the package name ``collections_app_base``; every other module (the models, the mapped index,
settings) is the one the working tree loaded, so both versions read the same store, the same mapping
and the same settings. Each question is asked of both in an alternating order, each after a sweep of
64 MiB (as bench/search_scale.py does), timed by the process's CPU time and the wall clock; the answers
are compared and any difference is printed. Uses the scale bench's store (bench/scale_store.py): run
`bench/search_scale.py --sizes 100000 --populate` first.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
from scale_stand_ins import GivenVectors  # noqa: E402
from scale_store import Mixture, load_scifact, setup_django  # noqa: E402

BASE = "collections_app_base"
# The modules loaded from the base commit; every other one is the working tree's, shared.
OWN = (
    "services.search",
    "services.rows",
    "services.readers",
    "ranking",
    "text.stitch",
    "text.budget",
    "index.bm25_top",
)
SWEEP_BYTES = 64 << 20


class _Shared(importlib.abc.Loader):
    """Loads ``collections_app_base.X`` as the working tree's ``collections_app.X`` itself."""

    def __init__(self, real: str):
        self.real = real

    def create_module(self, spec):
        return importlib.import_module(self.real)

    def exec_module(self, module):
        return None


class _BaseFinder(importlib.abc.MetaPathFinder):
    def __init__(self, folder: Path):
        self.folder = folder

    def find_spec(self, name, path=None, target=None):
        if name != BASE and not name.startswith(BASE + "."):
            return None
        inner = name[len(BASE) + 1 :]
        if any(inner == own or inner.startswith(own + ".") for own in OWN):
            source = self.folder.joinpath(*inner.split("."))
            if source.is_dir():
                return importlib.util.spec_from_file_location(
                    name, source / "__init__.py", submodule_search_locations=[str(source)]
                )
            return importlib.util.spec_from_file_location(name, source.with_suffix(".py"))
        if any(own.startswith(inner + ".") for own in OWN) or not inner:
            return None  # a package on the way to one of ours: an empty one, made below
        return importlib.util.spec_from_loader(name, _Shared("collections_app" + name[len(BASE) :]))


def load_base(commit: str) -> types.ModuleType:
    """The base commit's `collections_app.services.search`, sharing every other module with this tree."""
    folder = Path(tempfile.mkdtemp(prefix="search_ab_")) / BASE
    for own in OWN:
        relative = own.replace(".", "/")
        listed = subprocess.run(
            [
                "git",
                "ls-tree",
                "-r",
                "--name-only",
                commit,
                f"collections_app/{relative}",
                f"collections_app/{relative}.py",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        for path in listed:
            target = folder / path.removeprefix("collections_app/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(
                subprocess.run(
                    ["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True, check=True
                ).stdout
            )
    for package in {
        BASE,
        *(f"{BASE}.{'.'.join(own.split('.')[:i])}" for own in OWN for i in range(1, own.count(".") + 1)),
    }:
        module = types.ModuleType(package)
        module.__path__ = []
        sys.modules[package] = module
    sys.meta_path.insert(0, _BaseFinder(folder))
    return importlib.import_module(f"{BASE}.services.search")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare the working tree with")
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--arms", nargs="+", default=["lexical", "vector IVF"])
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--dataset", type=Path, default=Path(os.environ.get("SCIFACT", ROOT / "data/scifact"))
    )
    parser.add_argument("--profile", action="store_true", help="also cProfile the working tree's arms")
    args = parser.parse_args()
    setup_django(args.n)
    from django.conf import settings

    from collections_app.limits import MAX_ANSWER_CHARS
    from collections_app.models import Agent, Collection
    from collections_app.services import search as ours
    from ragsite import embedding

    base = load_base(args.base)
    _corpus, asked = load_scifact(args.dataset, args.questions)
    vectors = Mixture(args.n).draw(len(asked), rng=np.random.default_rng(11))
    given = dict(zip(asked, vectors, strict=True))
    embedding.get_embedder = lambda backend=None: GivenVectors("all-MiniLM-L6-v2", given)
    agent = Agent.objects.get(agent_id="scale")
    collection = Collection.objects.get(agent=agent, name="scale")
    modes = {
        "lexical": ("lexical", False),
        "vector IVF": ("vector", True),
        "hybrid IVF": ("hybrid", True),
        "vector": ("vector", False),
        "hybrid": ("hybrid", False),
    }

    def arm(module, name):
        mode, ivf = modes[name]

        def run(q):
            settings.IVF_MIN_PARAGRAPHS = 1 if ivf else 0
            return module.search_collection(
                agent=agent,
                collection=collection,
                question=q,
                mode=mode,
                most=10,
                around=0,
                min_score=0.0,
                max_chars=MAX_ANSWER_CHARS,
            )

        return run

    runs = {
        (version, name): arm(module, name)
        for version, module in (("base", base), ("new", ours))
        for name in args.arms
    }
    for run in runs.values():  # warm: the mapping, the IVF, each version's caches
        for q in asked[:3]:
            run(q)
    cpu = {key: [] for key in runs}
    wall = {key: [] for key in runs}
    differ = 0
    sweep = np.ones(SWEEP_BYTES // 8)
    order = np.random.default_rng(3)
    load = os.getloadavg()
    for _round in range(args.rounds):
        for q in asked:
            answers = {}
            for index in order.permutation(len(runs)):
                key = list(runs)[index]
                sweep.sum()
                started, started_cpu = time.perf_counter(), time.process_time()
                answers[key] = runs[key](q)
                wall[key].append(time.perf_counter() - started)
                cpu[key].append(time.process_time() - started_cpu)
            for name in args.arms:
                if answers[("base", name)] != answers[("new", name)]:
                    differ += 1
                    print(f"answers differ: {name} {q[:60]!r}", file=sys.stderr)
    print(
        f"load average before {load[0]:.2f} {load[1]:.2f}, after {os.getloadavg()[0]:.2f}; "
        f"{args.questions} questions x {args.rounds} rounds; base {args.base}"
    )
    print("| arm | base CPU p50 ms | new CPU p50 ms | new / base | base wall p50 | new wall p50 |")
    print("|---|---|---|---|---|---|")
    for name in args.arms:
        b, n = (1000 * np.percentile(cpu[(v, name)], 50) for v in ("base", "new"))
        bw, nw = (1000 * np.percentile(wall[(v, name)], 50) for v in ("base", "new"))
        print(f"| {name} | {b:.3f} | {n:.3f} | {n / b:.3f}× | {bw:.3f} | {nw:.3f} |")
    print(f"answers that differ: {differ}")
    if args.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        for name in args.arms:
            profile.enable()
            for q in asked:
                runs[("new", name)](q)
            profile.disable()
        pstats.Stats(profile).sort_stats("tottime").print_stats(40)


if __name__ == "__main__":
    main()
