"""What a build costs beyond embedding its paragraphs: build time against pure embedding time.

    python bench/build_overhead.py [CORPUS] [-n 200] [--rounds 2] [--embedder local|http]

CORPUS is a BEIR corpus.jsonl(.gz) (default: SciFact beside the repository); its first -n abstracts
become the documents of a collection folder. Each round, in one process: a full build of a fresh
collection (`build_collection`: extract, chunk, embed, write), then the same paragraph texts embedded
alone by the same embedder (`embed_with_usage`, batched as the build batches). Prints both times per
round and the overhead, build / embedding − 1 (target ≤ 15 %, issue 16). The store is a throw-away
SQLite file; with --embedder http, EMBED_URL and EMBED_MODEL must be set.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

DEFAULT_CORPUS = REPO.parent / "shared" / "datasets" / "scifact" / "corpus.jsonl.gz"  # beside the repository


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("corpus", nargs="?", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("-n", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--embedder", default="local")
    args = parser.parse_args()

    scratch = Path(tempfile.mkdtemp(prefix="build-overhead-"))
    os.environ["DATABASE_URL"] = f"sqlite:///{scratch / 'bench.sqlite3'}"
    os.environ["EMBED_BACKEND"] = args.embedder
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.conf import settings
    from django.core.management import call_command

    from collections_app.models import Paragraph
    from collections_app.services.agents import create_agent, create_collection
    from collections_app.services.builds import build_collection
    from ragsite import embedding

    call_command("migrate", verbosity=0)
    opener = gzip.open if args.corpus.suffix == ".gz" else open
    documents = []
    with opener(args.corpus, "rt", encoding="utf-8") as lines:
        for line in lines:
            item = json.loads(line)
            documents.append((item["_id"], f"{item.get('title', '')}\n\n{item['text']}".strip()))
            if len(documents) >= args.n:
                break
    agent = create_agent(agent_id="bench")[0]
    embedder = embedding.get_embedder()
    embedder.embed(["warm-up: load the model outside the timing"])
    batch = int(settings.EMBED_BATCH_SIZE) * int(settings.EMBED_CONCURRENCY)
    print(f"# {len(documents)} documents, embedder {embedder.model} ({args.embedder})")
    ratios = []
    for round_number in range(args.rounds):
        name = f"overhead{round_number}"
        folder = scratch / name
        folder.mkdir()
        for doc_id, text in documents:
            (folder / f"{doc_id}.txt").write_text(text + "\n", encoding="utf-8")
        os.environ[f"KNOWLEDGE_{name.upper()}_FOLDER"] = str(folder)
        collection = create_collection(agent=agent, name=name, built_from="SciFact abstracts")
        started = time.perf_counter()
        run = build_collection(collection=collection, requested_by="bench")
        built = time.perf_counter() - started
        if run.status != "succeeded":
            raise SystemExit(f"build {run.status}: {run.error}")
        texts = list(
            Paragraph.objects.filter(collection=collection).order_by("ordinal").values_list("text", flat=True)
        )
        started = time.perf_counter()
        for start in range(0, len(texts), batch):
            embedder.embed_with_usage(texts[start : start + batch])
        embedded = time.perf_counter() - started
        ratios.append(built / embedded - 1)
        print(
            f"round {round_number + 1}: {len(texts)} paragraphs; build {built:.1f} s, embedding alone "
            f"{embedded:.1f} s, overhead {ratios[-1]:+.1%}"
        )
    print(f"overhead, best round: {min(ratios):+.1%}; worst: {max(ratios):+.1%}")


if __name__ == "__main__":
    main()
