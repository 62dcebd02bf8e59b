"""SciFact (or another BEIR set) asked as an agent asks it: over HTTP, of a real gunicorn server, at the
defaults an agent meets (the default floor and the answer budget), with ``most`` and ``around`` chosen
(issue 45: nDCG@10 with `most` 10 and `around` 0).

    python bench/beir/beir_http.py ../shared/datasets/scifact --split test --most 10 --around 0

The store and its collection are beir.py's own (`beir.prepare`: built once, embeddings cached). A key is
issued to the bench agent, gunicorn (config/gunicorn_conf.py, one worker, the local model) serves that
store on a free port of 127.0.0.1, and every query goes to ``POST /api/v1/collections/<name>/search``
with only ``question``, ``most`` and ``around``: the server embeds the question, applies the collection's
floor and the 10,000-character budget. nDCG@10 is computed from the documents of the paragraphs returned,
in order, so a relevant document the floor left out counts as missed. Prints `nDCG@10 <value>`, how many
answers held fewer than ``most`` paragraphs, and the search's p50 over HTTP.
"""

import argparse
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench" / "memory"))

from beir import prepare, product_build  # noqa: E402
from memory_locomo import free_port, start, stop  # noqa: E402

from bench.common import results  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--split", choices=["test", "train"], default="test")
    parser.add_argument("--most", type=int, default=10)
    parser.add_argument("--around", type=int, default=0)
    parser.add_argument("--json", type=Path, help="write the figures here (default: bench/results/)")
    args = parser.parse_args()
    # The server checks the keys this process issues: one secret for both, made for this run.
    os.environ.setdefault("SECRET_KEY", secrets.token_urlsafe(50))
    agent, collection, queries, qrels = prepare(product_build(args.dataset, args.split))
    import httpx

    from collections_app.metrics import ndcg_at_k
    from collections_app.services.agents import issue_key

    _key, raw = issue_key(agent=agent, name="beir over HTTP")
    port = free_port()
    env = {
        **os.environ,
        "EMBED_BACKEND": "local",
        "LOG_LEVEL": "WARNING",
        "WEB_CONCURRENCY": "1",
        "WEB_BIND": f"127.0.0.1:{port}",
    }
    env.pop("REDIS_URL", None)
    log = ROOT / "data" / "bench" / "beir-http-server.log"
    server = start(
        [sys.executable, "-m", "gunicorn", "-c", "python:config.gunicorn_conf", "--log-level", "warning"],
        env,
        log,
    )
    base = f"http://127.0.0.1:{port}/api/v1/collections/{collection.name}/search"
    total, short, times = 0.0, 0, []
    try:
        with httpx.Client(headers={"Authorization": f"Bearer {raw}"}, timeout=120) as http:
            deadline = time.time() + 180
            while True:  # up once a search answers (the master warms the index before it binds)
                try:
                    http.post(base, json={"question": "warm up", "most": 1}).raise_for_status()
                    break
                except httpx.HTTPError:
                    if server.poll() is not None or time.time() > deadline:
                        raise SystemExit(f"the server did not come up; see {log}") from None
                    time.sleep(0.5)
            for qid, text in queries.items():
                began = time.perf_counter()
                response = http.post(base, json={"question": text, "most": args.most, "around": args.around})
                times.append(time.perf_counter() - began)
                response.raise_for_status()
                paragraphs = response.json()["paragraphs"]
                short += len(paragraphs) < args.most
                ranked = list(dict.fromkeys(p["document"].removesuffix(".txt") for p in paragraphs))
                total += ndcg_at_k(ranked, qrels[qid], k=10)
    finally:
        stop(server)
    ndcg = total / len(queries)
    p50 = 1000 * statistics.median(times)
    print(
        f"# {args.split}, {len(queries)} queries over HTTP, most {args.most}, around {args.around}",
        file=sys.stderr,
    )
    print(f"nDCG@10 {ndcg:.4f}")
    print(f"answers with fewer than {args.most} paragraphs: {short}; p50 {p50:.1f} ms")
    figures = {
        "dataset": args.dataset.resolve().name,
        "split": args.split,
        "most": args.most,
        "around": args.around,
        "queries": len(queries),
        "ndcg@10": ndcg,
        "short_answers": short,
        "p50_ms": p50,
    }
    name = f"beir-http-{figures['dataset']}-{args.split}-most{args.most}-around{args.around}"
    print("# written to", results.save(name, figures, args.json), file=sys.stderr)


if __name__ == "__main__":
    main()
